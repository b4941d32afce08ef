"""How each analysis is shown: one module per analysis of `tracelens.analyses`, of the same name, holding its
section of `tracelens analyze` and its panels of the report page (the summary, the head of every output, is shown
by `renderers/text.py` and `tracelens.report` instead). The registry names each function as "module:function"
(`Analysis.text`, `Analysis.panels`).

Contract of the module of analysis `x`:
- `x_parts(result, results) -> Parts`: its text section, rich renderables printed in order (None: skipped);
- `x_panels(result | None, results) -> page.AnalysisPanels`: its panels and where they go on the page (overview,
  "Where the time goes", "Findings"); given None (the analysis did not run) or a result with nothing to show, a
  panel says so.
Both are pure. Text output imports neither plotly nor `tracelens.report` (tests/test_startup.py): a module
imports rich and its analysis at the top, and the page's modules (`tracelens.report`, plotly) inside the
functions that build panels, so the text pays only for rich and the page only adds rich to plotly.
"""

from __future__ import annotations

from rich.console import RenderableType

Parts = list[RenderableType | None]
