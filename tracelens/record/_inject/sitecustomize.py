"""Imported by every Python that `tracelens record` starts (this folder is first on PYTHONPATH).

It first runs the environment's own `sitecustomize`, if any (found past this folder; it takes this module's
place in `sys.modules`), then activates the recorder (`tracelens/record/bootstrap.py`, loaded by path: the
program's interpreter need not have tracelens' dependencies), which records in the program's process only.
"""

import importlib.machinery
import importlib.util
import os
import sys


def _activate() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    sys.path[:] = rest
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        sys.modules["sitecustomize"] = module
        spec.loader.exec_module(module)
    config = os.environ.get("TRACELENS_RECORD_CONFIG")
    if config is None:
        return
    path = os.path.join(os.path.dirname(here), "bootstrap.py")
    spec = importlib.util.spec_from_file_location("_tracelens_record_bootstrap", path)
    if spec is not None and spec.loader is not None:
        bootstrap = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = bootstrap
        spec.loader.exec_module(bootstrap)
        bootstrap.activate(config)


_activate()
