"""Does one kernel cover several ops? Read from its decoded Inductor name (`triton_poi_fused_gelu_mul_0` →
gelu, mul), its readable name (`_geglu_tanh_forward_kernel` → gelu, mul) or the op that launched it
(`LigerGELUMulFunction` → gelu, mul), with the same op-word decoding as `tracelens compare`
(`tracelens.model.op_names.op_tokens`).

Contract: `coverage_source(ops, name, short_name, launching_ops)` → a description of where the ops were read,
or None when no single source names them all.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tracelens.model.op_names import op_tokens


def wanted_tokens(ops: Sequence[str]) -> list[frozenset[str]]:
    """Each requested op as op words (`layer_norm` → {layer, norm}); an unknown word stands for itself."""
    return [op_tokens(op) or frozenset({op.lower()}) for op in ops]


def coverage_source(ops: Sequence[str], name: str, short_name: str, launching_ops: Iterable[str]) -> str | None:
    wanted = wanted_tokens(ops)
    inductor = name.startswith("triton_")
    sources = [("decoded Inductor name" if inductor else "kernel name", name if inductor else short_name or name)]
    sources += [(f"launching op {op}", op) for op in dict.fromkeys(launching_ops) if op]
    for label, text in sources:
        tokens = op_tokens(text)
        if all(w <= tokens for w in wanted):
            return f"{label}: {', '.join(sorted(tokens))}"
    return None
