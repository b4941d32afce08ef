"""Names of CPU ops with a known role, and decoding of fused-kernel / autograd-Function names into op tokens."""

from __future__ import annotations

import re
from functools import lru_cache

# aten ops that only touch tensor metadata (no GPU work): pure CPU dispatch cost.
METADATA_OPS = frozenset(
    {
        "aten::t",
        "aten::transpose",
        "aten::view",
        "aten::_unsafe_view",
        "aten::as_strided",
        "aten::reshape",
        "aten::_reshape_alias",
        "aten::expand",
        "aten::expand_as",
        "aten::permute",
        "aten::unsqueeze",
        "aten::squeeze",
        "aten::slice",
        "aten::select",
        "aten::narrow",
        "aten::detach",
        "aten::alias",
        "aten::numpy_T",
        "aten::unflatten",
        "aten::flatten",
        "aten::split",
        "aten::chunk",
        "aten::unbind",
        "aten::view_as",
        "aten::lift_fresh",
        "aten::resolve_conj",
        "aten::resolve_neg",
    }
)

_INDUCTOR = re.compile(r"^triton_(?:poi|red|per|tem|for|sca|mix)?_?(?:fused_)?(?P<ops>.*?)(?:_\d+)?$")
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_NOISE = frozenset(
    {
        "aten",
        "liger",
        "function",
        "functionbackward",
        "backward",
        "forward",
        "kernel",
        "fused",
        "triton",
        "native",
        "default",
        "impl",
        "cuda",
        "tanh",
        "approximate",
        "out",
        "inplace",
        "poi",
        "red",
        "per",
        "tem",
    }
)
_SYNONYMS: dict[str, tuple[str, ...]] = {
    "geglu": ("gelu", "mul"),
    "swiglu": ("silu", "mul"),
    "silumul": ("silu", "mul"),
    "gelumul": ("gelu", "mul"),
    "rmsnorm": ("rms", "norm"),
    "layernorm": ("layer", "norm"),
    "addmm": ("addmm",),
}


_VOCABULARY = (
    "gelu",
    "silu",
    "relu",
    "sigmoid",
    "tanh",
    "mul",
    "add",
    "sub",
    "div",
    "exp",
    "softmax",
    "norm",
    "rms",
    "mean",
    "sum",
    "pow",
    "rsqrt",
    "sqrt",
    "neg",
    "cat",
    "copy",
    "clone",
    "where",
    "dropout",
    "embedding",
    "mm",
    "bmm",
    "addmm",
    "rope",
    "rotary",
    "cos",
    "sin",
)


def _split_words(chunk: str) -> list[str]:
    if not chunk:
        return []
    return [chunk] if chunk.islower() or chunk.isdigit() else _CAMEL.findall(chunk)


@lru_cache(maxsize=65536)
def op_tokens(name: str) -> frozenset[str]:
    """Lower-case op words in an op, kernel or autograd-Function name.

    `aten::gelu` → {gelu}; `triton_poi_fused_gelu_mul_0` → {gelu, mul};
    `LigerGELUMulFunction` → {gelu, mul}; `_geglu_tanh_forward_kernel` → {gelu, mul}.
    """
    text = name.split("::")[-1]
    match = _INDUCTOR.match(text)
    if match:
        text = match.group("ops")
    words = [w.lower() for chunk in re.split(r"[_\W]+", text) for w in _split_words(chunk)]
    joined = "".join(words)
    tokens = {w for w in words if len(w) > 2 and not w.isdigit()}
    tokens.update(word for word in _VOCABULARY if word in joined)
    for key, expansion in _SYNONYMS.items():
        if key in joined:
            tokens.discard(key)
            tokens.update(expansion)
    return frozenset(tokens - _NOISE)


_BACKWARD = re.compile(r"backward|bwd|(?:^|_)grad(?:_|$)", re.I)


def is_backward(name: str) -> bool:
    """Does `name` name a backward (gradient) op or kernel?"""
    return _BACKWARD.search(name) is not None
