"""`tracelens record`: run a PyTorch program unmodified under torch.profiler, with profiler-free timings.

Two halves (docs/record.md):
- `launcher` (this side, stdlib only, never imports torch): parses the options, starts the program in its own
  interpreter with `_inject/` first on `PYTHONPATH` and the options in `TRACELENS_RECORD_CONFIG`, waits, and
  reports the trace(s), the profiler-free vs profiled step time and (unless `--no-analyze`) the analysis.
- `bootstrap` (inside the program's interpreter, imported by `_inject/sitecustomize.py`): imports torch there,
  counts step boundaries (optimizer steps, outermost module calls or a named function), times `--steps` steps
  without the profiler just before the window, profiles the window and writes the trace with its
  `tracelens_record` metadata (`tracelens.record.meta`).
"""
