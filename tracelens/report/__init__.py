"""The interactive report's page data: sections of panels (Plotly figures, tables, notes) built from a `Trace`
and its `AnalysisResults`, before any HTML. Pure and deterministic (fixed panel order and ids).

`document` (the data types), `timeline`, `breakdowns`, `overview`, `compare` and `generic` build the pieces;
`tracelens.renderers.page.build_report` assembles them with every analysis' panels (built by its module of
`tracelens.renderers.analyses`, which the registry names) and `tracelens.renderers.html` writes the page.
Nothing here imports `tracelens.renderers`.
"""
