"""Does one kernel cover several ops? Read from its decoded Inductor name (`triton_poi_fused_gelu_mul_0` →
gelu, mul), its readable name (`_geglu_tanh_forward_kernel` → gelu, mul) or the op that launched it
(`LigerGELUMulFunction` → gelu, mul), with the same op-word decoding as `tracelens compare`
(`tracelens.model.op_names.op_tokens`).

Contract: `coverage_source(ops, name, short_name, launching_ops)` → a description of where the ops were read,
or None when no single source names them all.

Exact ops: a requested op matches whole op words, and its direction too: `cudnn_batch_norm` (forward) never
matches `cudnn_batch_norm_backward`, nor `gelu_backward` a forward gelu kernel. `"re:REGEX"` asks for a
pattern instead: the regular expression is searched (case-insensitively) in the kernel or op name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from tracelens.hypotheses.regex import subject
from tracelens.model.op_names import is_backward, op_tokens


def wanted_tokens(ops: Sequence[str]) -> list[frozenset[str]]:
    """Each requested op as op words (`layer_norm` → {layer, norm}); an unknown word stands for itself."""
    return [op_tokens(op) or frozenset({op.lower()}) for op in ops]


REGEX_PREFIX = "re:"


def coverage_source(ops: Sequence[str], name: str, short_name: str, launching_ops: Iterable[str]) -> str | None:
    words = [op for op in ops if not op.startswith(REGEX_PREFIX)]
    patterns = [re.compile(op[len(REGEX_PREFIX) :], re.I) for op in ops if op.startswith(REGEX_PREFIX)]
    wanted = wanted_tokens(words)
    backward = any(is_backward(op) for op in words)
    inductor = name.startswith("triton_")
    sources = [("decoded Inductor name" if inductor else "kernel name", name if inductor else short_name or name)]
    sources += [(f"launching op {op}", op) for op in dict.fromkeys(launching_ops) if op]
    for label, text in sources:
        tokens = op_tokens(text)
        if not patterns and is_backward(text) != backward:  # a pattern asks for what it matches
            continue
        if all(w <= tokens for w in wanted) and all(p.search(subject(text)) for p in patterns):
            return f"{label}: {', '.join(sorted(tokens))}"
    return None
