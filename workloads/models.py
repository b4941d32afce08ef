"""Models and callables for the recorded workloads.

* ``GeGLUMLP``: ``down(gelu_tanh(gate(x)) * up(x))`` with three bias-free
  ``nn.Linear`` layers named like Liger's ``LigerGEGLUMLP`` (gate_proj,
  up_proj, down_proj) so state dicts can be copied between them.
* the "linear" variants are a single ``nn.Linear(hidden, intermediate,
  bias=True)`` whose weight is a copy of the MLP's ``gate_proj`` and whose
  bias is ``randn(intermediate)`` from its own ``torch.Generator`` seeded with
  ``LINEAR_BIAS_SEED`` (so the global RNG, hence the input ``x``, is
  unchanged).  The bias makes eager Linear dispatch to ``aten::addmm``.
* attention: eager math ``softmax(QK^T/sqrt(d)) V`` and
  ``F.scaled_dot_product_attention``.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import os
import sys
import types

import torch
import torch.nn as nn
import torch.nn.functional as F

LINEAR_BIAS_SEED = 1
LINEAR_BIAS_INIT = "randn(intermediate), torch.Generator(cpu).manual_seed(%d)" % LINEAR_BIAS_SEED


class GeGLUMLP(nn.Module):
    """Eager three-Linear GeGLU MLP: down(gelu_tanh(gate(x)) * up(x))."""

    def __init__(self, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.hidden_size = hidden
        self.intermediate_size = intermediate
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))


def make_linear_from(mlp: GeGLUMLP) -> nn.Linear:
    """A Linear(hidden -> intermediate, bias=True) holding a copy of gate_proj's
    weight and a deterministic random bias (see ``LINEAR_BIAS_INIT``).  Draws
    nothing from the global RNG."""
    w = mlp.gate_proj.weight
    lin = nn.Linear(mlp.hidden_size, mlp.intermediate_size, bias=True, device="meta")
    gen = torch.Generator(device="cpu").manual_seed(LINEAR_BIAS_SEED)
    bias = torch.randn(mlp.intermediate_size, generator=gen)
    lin.weight = nn.Parameter(w.detach().clone(), requires_grad=w.requires_grad)
    lin.bias = nn.Parameter(bias.to(device=w.device, dtype=w.dtype), requires_grad=w.requires_grad)
    lin.train(mlp.gate_proj.training)
    return lin


def liger_status(device: torch.device) -> tuple[bool, str]:
    """Whether LigerGEGLUMLP can run here, and why not if it cannot."""
    if device.type != "cuda" or not torch.cuda.is_available():
        return False, "liger_mlp needs CUDA (device is %s)" % device.type
    if importlib.util.find_spec("triton") is None:
        return False, "liger_mlp needs triton, which is not installed"
    if importlib.util.find_spec("liger_kernel") is None:
        return False, "liger_mlp needs liger-kernel, which is not installed"
    try:
        importlib.import_module("liger_kernel.transformers.geglu")
    except Exception as exc:  # pragma: no cover - depends on the install
        return False, "importing liger_kernel.transformers.geglu failed: %r" % (exc,)
    return True, ""


def make_liger_mlp(mlp: GeGLUMLP) -> nn.Module:
    """LigerGEGLUMLP with the eager MLP's weights (same parameter names)."""
    from liger_kernel.transformers.geglu import LigerGEGLUMLP

    config = types.SimpleNamespace(
        hidden_size=mlp.hidden_size,
        intermediate_size=mlp.intermediate_size,
        hidden_act="gelu_pytorch_tanh",
    )
    p = next(mlp.parameters())
    liger = LigerGEGLUMLP(config).to(device=p.device, dtype=p.dtype)
    liger.load_state_dict(mlp.state_dict())
    liger.train(mlp.training)
    return liger


def geglu_status(device: torch.device, dtype: torch.dtype) -> tuple[bool, str]:
    """Whether the GeGLU epilogue kernel (workloads/geglu_kernel.py) can run
    here, and why not if it cannot.  On the CPU it runs under Triton's
    interpreter, in fp32 only (the interpreter's bf16/fp16 ``tl.dot`` returns
    garbage with triton 3.6)."""
    if importlib.util.find_spec("triton") is None:
        return False, "geglu_epilogue_mlp needs triton, which is not installed"
    if device.type == "cpu" and dtype != torch.float32:
        return False, "geglu_epilogue_mlp on the CPU (Triton interpreter) runs fp32 only"
    if device.type == "cpu" and "triton" in sys.modules and os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
        return False, ("geglu_epilogue_mlp on the CPU needs TRITON_INTERPRET=1 set before triton is imported "
                       "(the recorder sets it for --device cpu)")
    if device.type not in ("cpu", "cuda"):
        return False, "geglu_epilogue_mlp needs CUDA or the CPU (device is %s)" % device.type
    return True, ""


class GegluEpilogueMLP(nn.Module):
    """``down(geglu_gate_up(x))``: gate and up as one Triton GEMM over packed
    weights with gelu_tanh·mul in its epilogue (only the product is written),
    then ``down_proj`` as a plain ``F.linear`` (cuBLAS).  Forward only.

    The kernel configuration is chosen on the first call for a shape
    (``tune``); call it before profiling."""

    def __init__(self, mlp: GeGLUMLP) -> None:
        super().__init__()
        from .geglu_kernel import GegluGateUp

        self.hidden_size = mlp.hidden_size
        self.intermediate_size = mlp.intermediate_size
        self.down_weight = mlp.down_proj.weight.detach()
        self.gate_up = GegluGateUp(mlp.gate_proj.weight.detach(), mlp.up_proj.weight.detach())

    def tune(self, x: torch.Tensor):
        return self.gate_up.tune(x.reshape(-1, x.shape[-1]).contiguous())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        y = F.linear(self.gate_up(x2), self.down_weight)
        return y.reshape(*x.shape[:-1], y.shape[-1])


def compile_fn(fn, backend: str = "inductor", mode: str | None = None):
    """torch.compile with static shapes, after clearing Dynamo's caches so
    every compiled variant starts from a clean Dynamo state (Inductor's and
    Triton's on-disk caches still apply)."""
    torch._dynamo.reset()
    kwargs = {"backend": backend, "dynamic": False}
    if mode is not None:
        kwargs["mode"] = mode
    return torch.compile(fn, **kwargs)


def attn_math(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Eager math attention: softmax(Q K^T / sqrt(d)) V, no mask."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    s = torch.matmul(q, k.transpose(-2, -1)) * scale
    p = torch.softmax(s, dim=-1)
    return torch.matmul(p, v)


def attn_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, is_causal=False)


def check_close(out: torch.Tensor, ref: torch.Tensor, what: str, dtype: torch.dtype) -> dict:
    """Compare ``out`` with ``ref``; raise (loudly) if they differ beyond the
    tolerance of ``dtype``.  Returns the error numbers."""
    if out.shape != ref.shape:
        raise RuntimeError("%s: shape %s != reference shape %s" % (what, tuple(out.shape), tuple(ref.shape)))
    o = out.detach().float()
    r = ref.detach().float()
    if not torch.isfinite(o).all():
        raise RuntimeError("%s: output has non-finite values" % what)
    diff = (o - r).abs()
    ref_norm = r.norm().item()
    rel = (o - r).norm().item() / ref_norm if ref_norm > 0 else diff.max().item()
    max_abs = diff.max().item()
    scale = r.abs().max().item()
    if dtype in (torch.bfloat16, torch.float16):
        rel_tol, max_tol = 2e-2, 0.1 * scale + 1e-2
    else:
        rel_tol, max_tol = 1e-4, 1e-3 * scale + 1e-5
    res = {"rel_err": rel, "max_abs_err": max_abs, "ref_max_abs": scale, "rel_tol": rel_tol, "ok": True}
    if not (rel <= rel_tol and max_abs <= max_tol):
        res["ok"] = False
        raise RuntimeError(
            "OUTPUT MISMATCH %s: relative L2 error %.3e (tol %.1e), max abs error %.3e (tol %.3e)"
            % (what, rel, rel_tol, max_abs, max_tol)
        )
    return res


