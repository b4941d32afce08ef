"""Which ops one kernel covers: from its decoded Inductor name (`triton_poi_fused_gelu_mul_0` → gelu, mul),
from its readable name (`vectorized_elementwise_kernel[gelu]`) and from the ops that launched it
(`LigerGELUMulFunction` → liger, gelu, mul, function). `geglu`/`swiglu` stand for gelu·mul / silu·mul.

Contract: `covered_ops(name, short_name, launching_ops) -> Coverage`; `Coverage.covers(ops)` is True when every
requested op is among the words of one source.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_INDUCTOR = re.compile(r"^triton_(?:[a-z]+_)?fused_(?P<ops>.+?)(?:_\d+)*$")
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
SYNONYMS: dict[str, tuple[str, ...]] = {
    "geglu": ("gelu", "mul"),
    "swiglu": ("silu", "mul"),
    "silumul": ("silu", "mul"),
    "gelumul": ("gelu", "mul"),
}


def decode_inductor_name(name: str) -> tuple[str, ...]:
    """The aten op words of an Inductor kernel name, in order; () for other kernels."""
    match = _INDUCTOR.match(name)
    if match is None:
        return ()
    return tuple(word for word in match.group("ops").split("_") if word and not word.isdigit())


def words(text: str) -> tuple[str, ...]:
    """Lower-case words of a name: `LigerGELUMulFunction` → liger, gelu, mul, function; `aten::gelu` → aten, gelu."""
    found = [w.lower() for w in _WORD.findall(text)]
    expanded: list[str] = []
    for word in found:
        expanded.append(word)
        expanded.extend(SYNONYMS.get(word, ()))
    return tuple(expanded)


@dataclass(frozen=True)
class Coverage:
    """The words each source gives for one kernel."""

    kernel: str
    inductor: tuple[str, ...]
    readable: tuple[str, ...]
    launching_ops: tuple[tuple[str, tuple[str, ...]], ...]

    def covers(self, ops: Iterable[str]) -> str | None:
        """The source that names every op in `ops` ("decoded Inductor name", "launching op X", ...) or None."""
        wanted = [op.lower() for op in ops]
        if self.inductor and _all_in(wanted, self.inductor, joined="_".join(self.inductor)):
            return f"decoded Inductor name: {', '.join(self.inductor)}"
        if self.readable and _all_in(wanted, self.readable, joined="_".join(self.readable)):
            return f"kernel name words: {', '.join(dict.fromkeys(self.readable))}"
        for op_name, op_words in self.launching_ops:
            if _all_in(wanted, op_words, joined="_".join(op_words)):
                return f"launching op {op_name}"
        return None


def _all_in(wanted: list[str], have: tuple[str, ...], joined: str) -> bool:
    padded = f"_{joined}_"
    return all(op in have or f"_{op}_" in padded for op in wanted)


def covered_ops(name: str, short_name: str, launching_ops: Iterable[str]) -> Coverage:
    inductor = decode_inductor_name(name)
    readable = () if inductor else words(short_name or name)
    ops = tuple((op, words(op)) for op in dict.fromkeys(launching_ops) if op)
    return Coverage(kernel=name, inductor=inductor, readable=readable, launching_ops=ops)
