"""notebooks/study.ipynb: built from notebooks/study.py (never stale) and executed end to end with nbclient on
the committed traces, so the study's walkthrough cannot rot. Skips cleanly without the traces or nbclient."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import REPO, recorded_trace

NOTEBOOKS = REPO / "notebooks"
PLOTLY_MIME = "application/vnd.plotly.v1+json"


def builder() -> ModuleType:
    pytest.importorskip("nbformat")
    spec = importlib.util.spec_from_file_location("notebook_build", NOTEBOOKS / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("notebook_build", module)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_committed_notebook_is_built_from_its_source() -> None:
    build = builder()
    assert (NOTEBOOKS / "study.ipynb").read_text(encoding="utf-8") == build.dumps(build.build()), (
        "notebooks/study.ipynb is stale: run python notebooks/build.py"
    )


def test_committed_notebook_has_no_outputs() -> None:
    # the notebook's JSON read with the standard library (importing nbformat alone takes seconds here)
    notebook = json.loads((NOTEBOOKS / "study.ipynb").read_text(encoding="utf-8"))
    assert notebook["nbformat"] == 4
    code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    assert code and all(not cell["outputs"] and cell["execution_count"] is None for cell in code)


def test_cells_split_at_percent_markers() -> None:
    build = builder()
    cells = build.cells_of("# ---\n# jupyter: {}\n# ---\n\n# %% [markdown]\n# # Title\n# text\n\n# %%\nx = 1\n\nx\n")
    assert [(c.cell_type, c.source) for c in cells] == [("markdown", "# Title\ntext"), ("code", "x = 1\n\nx")]


@pytest.mark.slow
def test_notebook_executes_on_the_committed_traces(tmp_path: Path) -> None:
    recorded_trace("h200/eager_mlp.json.gz")
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    build = builder()
    notebook = build.execute(build.build(), timeout_s=300)
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "16 held, 9 wrong" in printed
    figures = [o for o in outputs if PLOTLY_MIME in o.get("data", {})]
    assert len(figures) == 9  # 6 drawn in the notebook, 3 from tracelens.plot (the report's figures)
    titles = [f["data"][PLOTLY_MIME]["layout"]["title"]["text"] for f in figures]
    assert titles[0] == "GPU kernels of ProfilerStep#5 (one bar segment per kernel)"
    assert titles[1:3] == ["GPU time per step by kernel category", "Timeline"]
    assert "CPU time per step by dispatch layer" in titles
    assert titles[-1] == "ProfilerStep#5: launches and kernels"
    timeline = figures[2]["data"][PLOTLY_MIME]
    assert len(timeline["data"]) > 5  # lanes of slices, bands and utilization strips, drawn inline
