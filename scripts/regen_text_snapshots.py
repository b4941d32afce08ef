"""Regenerate the text-output snapshots under tests/snapshots/ (see tests/text_snapshots.py).

    PYTHONPATH=. python scripts/regen_text_snapshots.py

Run it when the text output is meant to change, then review `git diff tests/snapshots`.
"""

from __future__ import annotations

from tests.text_snapshots import CASES, SNAPSHOTS, WIDTHS, render, snapshot_path


def main() -> None:
    SNAPSHOTS.mkdir(parents=True, exist_ok=True)
    for name in CASES:
        for width in WIDTHS:
            path = snapshot_path(name, width)
            path.write_text(render(name, width), encoding="utf-8")
            print(f"wrote {path.relative_to(SNAPSHOTS.parent.parent)}")


if __name__ == "__main__":
    main()
