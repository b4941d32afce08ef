"""A Llama-style decoder block in eager and Liger forms (and a GPT-2-style one, eager).

``LlamaBlock(hidden, heads, intermediate, attn=..., impl=...)``::

    h = x + o_proj(attention(rope(qkv_proj(rms_norm_1(x)))))     # causal
    y = h + mlp(rms_norm_2(h))                                      # SwiGLU

* ``impl="eager"``: RMSNorm, rotary embedding and SwiGLU written with torch
  ops (as in Hugging Face's Llama: the norm in fp32, ``rotate_half`` rope,
  ``down(silu(gate(x)) * up(x))``).
* ``impl="liger"``: ``LigerRMSNorm``, ``liger_rotary_pos_emb`` and
  ``LigerSwiGLUMLP`` from ``liger_kernel.transformers`` (Triton kernels);
  the projections, attention and residual adds stay torch.
* ``attn="sdpa"``: ``F.scaled_dot_product_attention(is_causal=True)``;
  ``attn="math"``: ``softmax(QK^T/sqrt(d) + causal mask, fp32) V`` with
  eager ops.

Both forms have the same parameter names (``input_layernorm.weight``,
``qkv_proj.weight``, ``o_proj.weight``, ``post_attention_layernorm.weight``,
``mlp.{gate,up,down}_proj.weight``), so state dicts copy between them.  The
rotary tables and the causal mask are buffers built once for ``max_seq``
positions (in fp32, cast with the module to its dtype) and sliced per call, so one module takes any sequence length up to
``max_seq``.

The eager and Liger forward passes mark their parts with
``torch.profiler.record_function`` scopes named by component: ``norm``,
``attention`` (QKV projection, attention, output projection), ``rope``
(inside ``attention``), ``mlp`` and ``residual``.  Dynamo drops these
scopes when the module is compiled, and backward kernels run outside them
(the autograd engine launches them).
"""

from __future__ import annotations

import math
import types

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import record_function

SCOPES = ("norm", "attention", "rope", "mlp", "residual")
ROPE_BASE = 10000.0
RMS_EPS = 1e-6


class RMSNorm(nn.Module):
    """Llama RMSNorm: ``weight * (x / sqrt(mean(x^2) + eps))`` computed in fp32,
    cast back to the input dtype before the weight multiply."""

    def __init__(self, hidden: int, eps: float = RMS_EPS) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.variance_epsilon = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        h = x.to(torch.float32)
        var = h.pow(2).mean(-1, keepdim=True)
        h = h * torch.rsqrt(var + self.variance_epsilon)
        return self.weight * h.to(dtype)


class SwiGLUMLP(nn.Module):
    """``down(silu(gate(x)) * up(x))``, bias-free, Liger's parameter names."""

    def __init__(self, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def rope_tables(max_seq: int, head_dim: int, base: float = ROPE_BASE) -> tuple[torch.Tensor, torch.Tensor]:
    """fp32 ``cos, sin`` of shape (max_seq, head_dim), Hugging Face layout
    (``cat(freqs, freqs)``)."""
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    pos = torch.arange(max_seq, dtype=torch.float32)
    freqs = torch.outer(pos, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager rotary embedding; q, k: (B, heads, S, D); cos, sin: (1, S, D)."""
    cos = cos.unsqueeze(1)
    sin = sin.unsqueeze(1)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def attention_math(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Causal ``softmax(QK^T / sqrt(d) + mask)`` in fp32, then ``@ V``
    (``mask``: (S, S) additive, -inf above the diagonal)."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    s = torch.matmul(q, k.transpose(-2, -1)) * scale
    s = s + mask
    p = torch.softmax(s, dim=-1, dtype=torch.float32).to(q.dtype)
    return torch.matmul(p, v)


def attention_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class LlamaBlock(nn.Module):
    """One pre-norm Llama decoder layer; ``forward(x)`` with x: (B, S, hidden)."""

    def __init__(self, hidden: int, heads: int, intermediate: int, max_seq: int, attn: str = "sdpa",
                 impl: str = "eager") -> None:
        super().__init__()
        if hidden % heads:
            raise ValueError("hidden %d is not a multiple of heads %d" % (hidden, heads))
        if attn not in ("sdpa", "math") or impl not in ("eager", "liger"):
            raise ValueError("attn must be sdpa|math and impl eager|liger, got %s, %s" % (attn, impl))
        self.hidden, self.heads, self.head_dim = hidden, heads, hidden // heads
        self.intermediate, self.attn, self.impl = intermediate, attn, impl
        if impl == "liger":
            from liger_kernel.transformers import LigerRMSNorm, LigerSwiGLUMLP, liger_rotary_pos_emb

            config = types.SimpleNamespace(hidden_size=hidden, intermediate_size=intermediate, hidden_act="silu")
            self.input_layernorm: nn.Module = LigerRMSNorm(hidden, eps=RMS_EPS)
            self.post_attention_layernorm: nn.Module = LigerRMSNorm(hidden, eps=RMS_EPS)
            self.mlp: nn.Module = LigerSwiGLUMLP(config)
            self._rope = liger_rotary_pos_emb
        else:
            self.input_layernorm = RMSNorm(hidden)
            self.post_attention_layernorm = RMSNorm(hidden)
            self.mlp = SwiGLUMLP(hidden, intermediate)
            self._rope = apply_rope
        self.qkv_proj = nn.Linear(hidden, 3 * hidden, bias=False)
        self.o_proj = nn.Linear(hidden, hidden, bias=False)
        self._attend = attention_sdpa if attn == "sdpa" else attention_math
        cos, sin = rope_tables(max_seq, self.head_dim)
        self.register_buffer("cos_cached", cos, persistent=False)
        self.register_buffer("sin_cached", sin, persistent=False)
        mask = torch.full((max_seq, max_seq), float("-inf")).triu(1) if attn == "math" else torch.zeros(0)
        self.register_buffer("causal_mask", mask, persistent=False)

    def norms(self) -> tuple[nn.Module, ...]:
        return (self.input_layernorm, self.post_attention_layernorm)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        with record_function("norm"):
            h = self.input_layernorm(x)
        with record_function("attention"):
            qkv = self.qkv_proj(h).view(b, s, 3, self.heads, self.head_dim)
            q, k, v = (t.transpose(1, 2) for t in qkv.unbind(2))
            with record_function("rope"):
                cos = self.cos_cached[:s].unsqueeze(0)
                sin = self.sin_cached[:s].unsqueeze(0)
                q, k = self._rope(q, k, cos, sin)
            mask = self.causal_mask[:s, :s] if self.attn == "math" else self.causal_mask
            o = self._attend(q, k, v, mask)
            o = self.o_proj(o.transpose(1, 2).reshape(b, s, self.hidden))
        with record_function("residual"):
            h = x + o
        with record_function("norm"):
            n = self.post_attention_layernorm(h)
        with record_function("mlp"):
            m = self.mlp(n)
        with record_function("residual"):
            return h + m


class GPTBlock(nn.Module):
    """One pre-norm GPT-2-style layer; ``forward(x)`` with x: (B, S, hidden)::

        h = x + proj(attention(qkv(layer_norm_1(x))))      # causal SDPA, biases
        y = h + fc_out(gelu_tanh(fc_in(layer_norm_2(h))))    # 4x MLP by default

    ``nn.LayerNorm`` (one kernel each way in eager), ``F.gelu(approximate="tanh")``,
    every Linear with a bias; the same ``record_function`` scopes as ``LlamaBlock``
    (no ``rope``).  Eager only (``impl="eager"``, ``attn="sdpa"``)."""

    def __init__(self, hidden: int, heads: int, intermediate: int, max_seq: int, attn: str = "sdpa",
                 impl: str = "eager") -> None:
        super().__init__()
        if hidden % heads:
            raise ValueError("hidden %d is not a multiple of heads %d" % (hidden, heads))
        if attn != "sdpa" or impl != "eager":
            raise ValueError("the GPT block is eager SDPA only, got %s, %s" % (attn, impl))
        self.hidden, self.heads, self.head_dim = hidden, heads, hidden // heads
        self.intermediate, self.attn, self.impl = intermediate, attn, impl
        self.ln_1 = nn.LayerNorm(hidden)
        self.qkv_proj = nn.Linear(hidden, 3 * hidden)
        self.o_proj = nn.Linear(hidden, hidden)
        self.ln_2 = nn.LayerNorm(hidden)
        self.fc_in = nn.Linear(hidden, intermediate)
        self.fc_out = nn.Linear(intermediate, hidden)

    def norms(self) -> tuple[nn.Module, ...]:
        return (self.ln_1, self.ln_2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        with record_function("norm"):
            h = self.ln_1(x)
        with record_function("attention"):
            q, k, v = self.qkv_proj(h).split(self.hidden, dim=2)
            q, k, v = (t.view(b, s, self.heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            o = self.o_proj(o.transpose(1, 2).reshape(b, s, self.hidden))
        with record_function("residual"):
            h = x + o
        with record_function("norm"):
            n = self.ln_2(h)
        with record_function("mlp"):
            m = self.fc_out(F.gelu(self.fc_in(n), approximate="tanh"))
        with record_function("residual"):
            return h + m


BLOCK_KINDS = {"llama": LlamaBlock, "gpt": GPTBlock}


def liger_block_status(device: torch.device) -> tuple[bool, str]:
    """Whether the Liger block can run here, and why not if it cannot."""
    import importlib.util

    if device.type != "cuda" or not torch.cuda.is_available():
        return False, "Liger needs CUDA (device is %s)" % device.type
    for mod in ("triton", "liger_kernel"):
        if importlib.util.find_spec(mod) is None:
            return False, "Liger needs %s, which is not installed" % mod
    try:
        from liger_kernel.transformers import LigerRMSNorm, LigerSwiGLUMLP, liger_rotary_pos_emb  # noqa: F401
    except Exception as exc:  # pragma: no cover - depends on the install
        return False, "importing liger_kernel.transformers failed: %r" % (exc,)
    return True, ""


def make_block(cfg: dict, impl: str, attn: str, device: torch.device, dtype: torch.dtype,
               like: nn.Module | None = None) -> nn.Module:
    """A block built from ``cfg`` (hidden, heads, intermediate, max_seq, and
    ``kind``: ``llama`` (default) or ``gpt``, see ``BLOCK_KINDS``); with
    ``like``, a copy of its weights (same train/eval mode).  Weights of a new
    block: ``torch.manual_seed(0)``, default init, norm weights ``1 + 0.1 randn``
    (so the norm's weight multiply is not a no-op)."""
    kind = BLOCK_KINDS[cfg.get("kind", "llama")]
    blk = kind(cfg["hidden"], cfg["heads"], cfg["intermediate"], cfg["max_seq"], attn=attn, impl=impl)
    if like is None:
        torch.manual_seed(0)
        fresh = kind(cfg["hidden"], cfg["heads"], cfg["intermediate"], cfg["max_seq"], attn=attn)
        with torch.no_grad():
            for n in fresh.norms():
                n.weight.copy_(1 + 0.1 * torch.randn(cfg["hidden"]))
        state = fresh.state_dict()
        training = True
    else:
        state = like.state_dict()
        training = like.training
    blk.load_state_dict(state)
    blk = blk.to(device=device, dtype=dtype)
    blk.train(training)
    return blk


def block_flops(tokens: int, seq: int, batch: int, hidden: int, intermediate: int) -> dict:
    """Forward matmul FLOPs of one block call (2 per multiply-add): the
    projections and MLP GEMMs, and causal attention counted as the full
    S x S product halved."""
    gemm = 2 * tokens * hidden * (3 * hidden + hidden + 3 * intermediate)
    attn = 2 * 2 * batch * seq * seq * hidden // 2
    return {"gemm_flops": gemm, "attention_flops_causal": attn}
