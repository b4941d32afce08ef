"""Write tests/data/eager_mlp_integer_us.json.gz: traces/h200/eager_mlp.json.gz with every `ts` and `dur` rounded
to whole microseconds, as some Kineto writers (deepseek-ai/profile-data's H800 trace, not redistributable) store
them. The stand-in for that trace's tests (integer timestamps; kernel totals equal HTA's exactly). Rerun after the
source trace changes and review the diff."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "traces" / "h200" / "eager_mlp.json.gz"
TARGET = ROOT / "tests" / "data" / "eager_mlp_integer_us.json.gz"


def main() -> None:
    with gzip.open(SOURCE, "rt") as handle:
        document = json.load(handle)
    for event in document["traceEvents"]:
        for key in ("ts", "dur"):
            if isinstance(event.get(key), int | float):
                event[key] = int(round(event[key]))
    document["tracelens_derived"] = f"{SOURCE.relative_to(ROOT)} with ts and dur rounded to whole µs"
    with gzip.GzipFile(TARGET, "wb", mtime=0) as handle:
        handle.write(json.dumps(document).encode())
    print(f"wrote {TARGET.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
