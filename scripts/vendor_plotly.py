"""Refresh tracelens/renderers/vendor/ (plotly.js' cartesian partial bundle that the HTML report inlines) to the
plotly.js version of the installed plotly package, from the npm package `plotly.js-cartesian-dist-min`:

    PYTHONPATH=. python scripts/vendor_plotly.py

Needs `npm`. Run it after upgrading plotly: until then the report falls back to the plotly package's full bundle
(renderers/html.py checks the versions), and tests/test_plotly_bundle.py fails.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

VENDOR = Path(__file__).resolve().parent.parent / "tracelens" / "renderers" / "vendor"
FILES = {"package/plotly-cartesian.min.js": "plotly-cartesian.min.js", "package/LICENSE": "plotly.js-LICENSE"}


def main() -> int:
    from plotly.offline import get_plotlyjs_version

    version = get_plotlyjs_version()
    with tempfile.TemporaryDirectory() as tmp:
        spec = f"plotly.js-cartesian-dist-min@{version}"
        done = subprocess.run(["npm", "pack", spec, "--silent"], cwd=tmp, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(f"npm pack {spec} failed: {done.stderr.strip()}", file=sys.stderr)
            return 1
        with tarfile.open(Path(tmp) / done.stdout.strip().splitlines()[-1]) as archive:
            for member, name in FILES.items():
                source = archive.extractfile(member)
                if source is None:
                    print(f"{member} missing from {spec}", file=sys.stderr)
                    return 1
                (VENDOR / name).write_bytes(source.read())
    print(f"vendored plotly.js cartesian {version} into {VENDOR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
