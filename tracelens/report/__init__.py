"""The interactive report's page data: sections of panels (Plotly figures, tables, notes) built from a `Trace`
and its `AnalysisResults`, before any HTML. Pure and deterministic (fixed panel order and ids).

`document` (the data types), `timeline`, `breakdowns`, `overview`, `compare` and `findings` build the pieces;
`tracelens.renderers.page.build_report` assembles them (the registry says which analysis gives which panels)
and `tracelens.renderers.html` writes the page. Nothing here imports `tracelens.renderers`.
"""
