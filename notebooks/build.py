"""Build notebooks/study.ipynb (no outputs) from its source notebooks/study.py (jupytext percent format).

    python notebooks/build.py            # rewrite study.ipynb
    python notebooks/build.py --check    # exit 1 if study.ipynb is not what study.py gives
    python notebooks/build.py --execute  # also run it; writes build/study.executed.ipynb (git-ignored)

Only nbformat is needed (nbclient + ipykernel for --execute); cells are split at `# %%` lines and
`# %% [markdown]` cells lose their leading `# `.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "study.py"
NOTEBOOK = HERE / "study.ipynb"
KERNEL = {"display_name": "Python 3", "language": "python", "name": "python3"}


def _strip_header(lines: list[str]) -> list[str]:
    """Drop the `# ---` … `# ---` jupytext header."""
    if lines and lines[0].strip() == "# ---":
        end = next(i for i, line in enumerate(lines[1:], start=1) if line.strip() == "# ---")
        return lines[end + 1 :]
    return lines


def _markdown(lines: list[str]) -> str:
    return "\n".join(line[2:] if line.startswith("# ") else line.lstrip("#") for line in lines).strip("\n")


def cells_of(text: str) -> list[nbformat.NotebookNode]:
    cells: list[nbformat.NotebookNode] = []
    kind, body = None, []
    for line in [*_strip_header(text.splitlines()), "# %%"]:
        if line.startswith("# %%"):
            if kind is not None:
                source = _markdown(body) if kind == "markdown" else "\n".join(body).strip("\n")
                make = nbformat.v4.new_markdown_cell if kind == "markdown" else nbformat.v4.new_code_cell
                cells.append(make(source))
            kind, body = ("markdown" if "[markdown]" in line else "code"), []
        else:
            body.append(line)
    return cells


def build(source: Path = SOURCE) -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = KERNEL
    notebook.metadata["language_info"] = {"name": "python"}
    notebook.cells = cells_of(source.read_text(encoding="utf-8"))
    for index, cell in enumerate(notebook.cells):
        cell["id"] = f"cell-{index:02d}"  # stable ids: rebuilding gives the same file
    return notebook


def dumps(notebook: nbformat.NotebookNode) -> str:
    return nbformat.writes(notebook) + "\n"


def execute(notebook: nbformat.NotebookNode, timeout_s: int = 300) -> nbformat.NotebookNode:
    from nbclient import NotebookClient

    client = NotebookClient(notebook, timeout=timeout_s, kernel_name="python3", resources={"metadata": {"path": HERE}})
    client.execute()
    return notebook


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="fail if study.ipynb is out of date")
    parser.add_argument("--execute", action="store_true", help="run it; write build/study.executed.ipynb")
    args = parser.parse_args(argv)
    text = dumps(build())
    if args.check:
        current = NOTEBOOK.read_text(encoding="utf-8") if NOTEBOOK.exists() else ""
        if current != text:
            print(f"{NOTEBOOK} is out of date; run python notebooks/build.py", file=sys.stderr)
            return 1
        return 0
    NOTEBOOK.write_text(text, encoding="utf-8")
    print(f"Wrote {NOTEBOOK}")
    if args.execute:
        executed = HERE.parent / "build" / "study.executed.ipynb"
        executed.parent.mkdir(exist_ok=True)
        executed.write_text(dumps(execute(build())), encoding="utf-8")
        print(f"Wrote {executed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
