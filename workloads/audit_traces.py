"""Audit recordings for issue #14 (held-out traces). Run on the H200:
    python3 workloads/audit_traces.py OUTDIR   (needs CUDA; its traces are traces/h200/audit/)
Writes <= 7 traces (*.json.gz) + 1 execution trace, and prints a compact
timings JSON at the end (also stored in each trace under key audit_run)."""
import gzip, json, math, os, sys, time, traceback, shutil

T0 = time.time()
BUDGET_S = float(os.environ.get("AUDIT_BUDGET_S", "250"))
OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, schedule

dev = torch.device("cuda")
WAIT, WARMUP, ACTIVE = 1, 2, 4
NSTEPS = WAIT + WARMUP + ACTIVE
TIMINGS = {"env": {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0),
                   "cuda": torch.version.cuda}}


def log(*a):
    print("[%6.1fs]" % (time.time() - T0), *a, flush=True)


def left():
    return BUDGET_S - (time.time() - T0)


def record(name, step_fn, *, grad=True, sync=True, with_stack=False, memory=False, et=False, meta=None):
    """Profile NSTEPS calls of step_fn(i). CUDA events at each step's start and
    end (on the current stream) and host perf_counter around each call."""
    tmp = "/tmp/%s.json" % name
    ev_start = [torch.cuda.Event(enable_timing=True) for _ in range(NSTEPS + 1)]
    ev_end = [torch.cuda.Event(enable_timing=True) for _ in range(NSTEPS)]
    host = []
    kwargs = {}
    etobs = None
    if et:
        try:
            from torch.profiler import ExecutionTraceObserver
            etobs = ExecutionTraceObserver().register_callback("/tmp/%s_et.json" % name)
            kwargs["execution_trace_observer"] = etobs
        except Exception as e:
            log("ET unavailable", repr(e))
            etobs = None
    torch.cuda.synchronize()
    ctx = torch.enable_grad() if grad else torch.no_grad()
    with ctx, profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                      schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1),
                      record_shapes=True, with_stack=with_stack, profile_memory=memory,
                      on_trace_ready=lambda p: p.export_chrome_trace(tmp), **kwargs) as prof:
        for i in range(NSTEPS):
            t0 = time.perf_counter()
            ev_start[i].record()
            step_fn(i)
            ev_end[i].record()
            if sync:
                torch.cuda.synchronize()
            t1 = time.perf_counter()
            host.append(((t0 - T0) * 1e3, (t1 - t0) * 1e3))
            prof.step()
    ev_start[NSTEPS].record()
    torch.cuda.synchronize()
    if etobs is not None:
        try:
            etobs.unregister_callback()
        except Exception as e:
            log("ET unregister", repr(e))
    tim = {
        "sync_per_step": sync,
        "active_steps_index": list(range(WAIT + WARMUP, NSTEPS)),
        "host_call_ms": [round(h[1], 4) for h in host],  # step_fn (+ sync when sync) wall time
        "host_start_ms": [round(h[0], 3) for h in host],
        "gpu_start_to_end_ms": [round(ev_start[i].elapsed_time(ev_end[i]), 4) for i in range(NSTEPS)],
        "gpu_start_to_next_start_ms": [round(ev_start[i].elapsed_time(ev_start[i + 1]), 4) for i in range(NSTEPS)],
        "meta": meta or {},
    }
    with open(tmp) as f:
        data = json.load(f)
    data["audit_run"] = {"name": name, "timings": tim, "env": TIMINGS["env"],
                         "schedule": [WAIT, WARMUP, ACTIVE], "with_stack": with_stack,
                         "profile_memory": memory}
    path = os.path.join(OUT, name + ".json.gz")
    with gzip.open(path, "wt", compresslevel=6) as f:
        json.dump(data, f)
    os.remove(tmp)
    sz = os.path.getsize(path)
    tim["gz_bytes"] = sz
    etp = "/tmp/%s_et.json" % name
    if et and os.path.exists(etp):
        with open(etp, "rb") as fi, gzip.open(os.path.join(OUT, name + "_et.json.gz"), "wb") as fo:
            shutil.copyfileobj(fi, fo)
        tim["et_gz_bytes"] = os.path.getsize(os.path.join(OUT, name + "_et.json.gz"))
    TIMINGS[name] = tim
    log("wrote", name, sz, "bytes", "gpu_period_ms", tim["gpu_start_to_next_start_ms"])


# ---------------------------------------------------------------- (a) conv net
class Block(nn.Module):
    def __init__(self, cin, cout, stride, dw=False):
        super().__init__()
        if dw:
            self.c1 = nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False)
            self.b1 = nn.BatchNorm2d(cin)
            self.c2 = nn.Conv2d(cin, cout, 1, 1, 0, bias=False)
        else:
            self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(cout)
            self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        s = x if self.short is None else self.short(x)
        return F.relu(y + s)


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU())
        self.blocks = nn.Sequential(Block(64, 64, 1), Block(64, 128, 2), Block(128, 256, 2),
                                    Block(256, 256, 1, dw=True))
        self.fc = nn.Linear(256, 100)

    def forward(self, x):
        x = self.blocks(F.max_pool2d(self.stem(x), 3, 2, 1))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def conv_train():
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    m = ConvNet().to(dev).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9, nesterov=True, weight_decay=1e-4)
    x = torch.randn(64, 3, 128, 128, device=dev).to(memory_format=torch.channels_last)
    y = torch.randint(0, 100, (64,), device=dev)

    def step(i):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
    for _ in range(5):
        step(0)
    torch.cuda.synchronize()
    record("conv_train_fp32_cl", step, meta={"model": "ResNet-ish 4 blocks + depthwise, fp32 params, channels_last, "
                                         "cudnn.benchmark=True, cudnn.allow_tf32=%s" % torch.backends.cudnn.allow_tf32,
                                         "batch": 64, "input": [3, 128, 128], "optimizer": "SGD nesterov momentum=0.9 wd=1e-4"})


# ---------------------------------------------------------------- (b,c,d) GPT-2
class GPTBlock(nn.Module):
    def __init__(self, d, h, p=0.1):
        super().__init__()
        self.h = h
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        self.drop = nn.Dropout(p)

    def forward(self, x, mask):
        B, T, D = x.shape
        q, k, v = self.attn(self.ln1(x)).split(D, dim=2)
        q = q.view(B, T, self.h, D // self.h).transpose(1, 2)
        k = k.view(B, T, self.h, D // self.h).transpose(1, 2)
        v = v.view(B, T, self.h, D // self.h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D // self.h))
        att = att.masked_fill(mask[:, :, :T, :T] == 0, float("-inf"))
        att = self.drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, D)
        x = x + self.drop(self.proj(y))
        x = x + self.drop(self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh")))
        return x


class GPT(nn.Module):
    def __init__(self, vocab=8192, ctx=512, d=768, h=12, layers=2):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(ctx, d)
        self.drop = nn.Dropout(0.1)
        self.blocks = nn.ModuleList([GPTBlock(d, h) for _ in range(layers)])
        self.lnf = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.wte.weight  # tied
        self.register_buffer("mask", torch.tril(torch.ones(ctx, ctx)).view(1, 1, ctx, ctx))

    def forward(self, idx):
        B, T = idx.shape
        pos = torch.arange(0, T, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for b in self.blocks:
            x = b(x, self.mask)
        return self.head(self.lnf(x))


def gpt_train(compiled):
    torch.manual_seed(0)
    m = GPT().to(dev)
    model = torch.compile(m) if compiled else m
    opt = torch.optim.AdamW(m.parameters(), lr=3e-4, weight_decay=0.1)
    idx = torch.randint(0, 8192, (8, 512), device=dev)
    tgt = torch.randint(0, 8192, (8, 512), device=dev)
    losses = []

    def step(i):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(idx)
        loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), tgt.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    for _ in range(5):
        step(0)
    torch.cuda.synchronize()
    name = "gpt2_train_compiled_stack" if compiled else "gpt2_train_eager"
    record(name, step, with_stack=compiled, et=not compiled,
           meta={"model": "GPT-2 style 2 layers d=768 h=12 vocab=8192 ctx=512 tied head, math attention, dropout 0.1",
                 "batch": 8, "seq": 512, "autocast": "bf16", "optimizer": "AdamW(foreach default) + clip_grad_norm_",
                 "compiled": "torch.compile(model) default" if compiled else None, "loss_item_each_step": True})


def gpt_cudagraph():
    torch.manual_seed(0)
    m = GPT().to(dev).to(torch.bfloat16).eval()
    model = torch.compile(m, mode="reduce-overhead")
    idx = torch.randint(0, 8192, (8, 512), device=dev)
    outs = []

    def step(i):
        torch.compiler.cudagraph_mark_step_begin()
        out = model(idx)
        outs.append(out[0, 0, :4].float().sum())
    with torch.no_grad():
        for _ in range(5):
            step(0)
    torch.cuda.synchronize()
    record("gpt2_infer_cudagraph", step, grad=False,
           meta={"model": "GPT-2 style 2 layers bf16 eval", "batch": 8, "seq": 512,
                 "compiled": "torch.compile(mode='reduce-overhead')"})


# ---------------------------------------------------------------- (e) backlog
def backlog():
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    c = torch.empty(8192, 8192, device=dev, dtype=torch.bfloat16)
    small = torch.zeros(1024, device=dev)

    def step(i):
        for _ in range(60):
            small.add_(1.0)
        torch.mm(a, b, out=c)
        torch.mm(c, b, out=a)
        a.mul_(1e-4)
    for _ in range(3):
        step(0)
    torch.cuda.synchronize()
    record("backlog_nosync", step, grad=False, sync=False,
           meta={"per_step": "60x small.add_(1) on 1024 fp32, mm(a,b,out=c), mm(c,b,out=a) 8192^3 bf16, a.mul_(1e-4)",
                 "sync_per_step": False, "flops_per_step": 2 * 2 * 8192 ** 3})


# ---------------------------------------------------------------- (f) op mix
def opmix():
    torch.manual_seed(0)
    D = 1024
    B, T = 16, 256
    E = nn.Embedding(32000, D).to(dev)
    ln = nn.LayerNorm(2 * D).to(dev)
    perm = torch.randperm(T, device=dev)
    unrelated = torch.randn(B, T, 2 * D, device=dev)
    w = torch.empty(4096, 4096, device=dev)
    idx = torch.randint(0, 32000, (B, T), device=dev)
    A = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    Bm = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    C = torch.empty(4096, 4096, device=dev, dtype=torch.bfloat16)
    bias = torch.randn(4096, device=dev, dtype=torch.bfloat16)
    A32 = torch.randn(4096, 4096, device=dev)
    B32 = torch.randn(4096, 4096, device=dev)
    bb1 = torch.randn(32, 512, 512, device=dev, dtype=torch.bfloat16)
    bb2 = torch.randn(32, 512, 512, device=dev, dtype=torch.bfloat16)
    bb0 = torch.randn(32, 512, 512, device=dev, dtype=torch.bfloat16)
    a8 = torch.randint(-8, 8, (4096, 4096), device=dev, dtype=torch.int8)
    b8 = torch.randint(-8, 8, (4096, 4096), device=dev, dtype=torch.int8)
    extras = {}
    try:
        af = torch.randn(8192, 8192, device=dev).to(torch.float8_e4m3fn)
        bf = torch.randn(8192, 8192, device=dev).to(torch.float8_e4m3fn).t()
        one = torch.tensor(1.0, device=dev)
        torch._scaled_mm(af, bf, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        extras["fp8"] = lambda: torch._scaled_mm(af, bf, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    except Exception as e:
        log("fp8 off", repr(e))
    try:
        torch._int_mm(a8, b8)
        extras["int8"] = lambda: torch._int_mm(a8, b8)
    except Exception as e:
        log("int8 off", repr(e))
    convw = torch.randn(256, 128, 3, 3, device=dev, dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    convx = torch.randn(32, 128, 64, 64, device=dev, dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    tw = torch.randn(256, 64, 4, 4, device=dev, dtype=torch.bfloat16)
    vals = []

    def tf32(on):
        try:
            torch.backends.cuda.matmul.fp32_precision = "tf32" if on else "ieee"
        except Exception:
            torch.backends.cuda.matmul.allow_tf32 = on

    def step(i):
        x = torch.randn(B, T, D, device=dev)                # normal_ (RNG)
        w.normal_(0, 0.02)                                  # in-place RNG
        emb = E(idx)                                        # embedding fwd
        h = torch.cat([x, emb], dim=-1)                     # cat
        h = ln(h)                                           # LayerNorm fwd
        sel = torch.index_select(h, 1, perm)                # index_select
        y = sel * 2.0                                       # chain: mul -> add -> relu
        z = y + 1.0
        u = torch.relu(z)
        q = unrelated * 3.0                                 # unrelated, same shape as u, right after it
        s1 = torch.sin(h)                                   # siblings of h
        s2 = torch.cos(h)
        tot = u + q
        tot = tot + s1
        tot = tot + s2
        loss = tot.float().pow(2).mean()
        loss.backward()                                     # LN bwd, embedding bwd, index_select bwd, cat bwd
        vals.append(loss.item())                            # sync each step
        with torch.no_grad():
            torch.mm(A, Bm, out=C)                          # out= GEMM
            torch.addmm(bias, A, Bm)
            torch.baddbmm(bb0, bb1, bb2)
            tf32(True)
            torch.mm(A32, B32)                              # fp32 with TF32
            tf32(False)
            torch.mm(A32, B32)                              # true fp32
            for f in extras.values():
                f()
            F.conv2d(convx, convw, padding=1)
            F.conv_transpose2d(convx[:, :64].contiguous(), tw[:64].contiguous(), stride=2, padding=1)
            F.dropout(C, 0.1, training=True)
            torch.softmax(C, dim=-1)
        E.weight.grad = None
        ln.weight.grad = None
        ln.bias.grad = None
    for _ in range(3):
        step(0)
    torch.cuda.synchronize()
    record("opmix_train", step, memory=True,
           meta={"ops": "randn, normal_, embedding fwd/bwd, cat, layer_norm fwd/bwd, index_select fwd/bwd, "
                        "mul->add->relu chain, unrelated mul of same shape after the chain, sin/cos siblings of h, "
                        ".item() each step; no_grad: mm(out=), addmm, baddbmm, fp32 mm TF32 then IEEE, "
                        + ",".join(extras) + ", bf16 conv2d channels_last, conv_transpose2d, dropout, softmax",
                 "shapes": {"B": B, "T": T, "D": D, "gemm": 4096, "bmm": [32, 512, 512], "fp8": 8192, "int8": 4096},
                 "profile_memory": True})


# ---------------------------------------------------------------- recompiles
def recompile():
    try:
        torch._dynamo.config.recompile_limit = 16
    except Exception:
        torch._dynamo.config.cache_size_limit = 16

    @torch.compile(dynamic=False)
    def f(x):
        y = torch.sin(x) * 2.0
        torch._dynamo.graph_break()
        return torch.relu(y + torch.cos(x)).sum()

    sizes = [1 << 20, 1 << 20, 1 << 21, 1 << 21, 1 << 22, 1 << 22, 1 << 23]
    xs = [torch.randn(n, device=dev, requires_grad=True) for n in sizes]

    def step(i):
        f(xs[i]).backward()
    record("recompile_shapes", step, with_stack=True,
           meta={"fn": "torch.compile(dynamic=False) f(x)=relu(sin(x)*2 [graph_break] + cos(x)).sum(), backward",
                 "numel_per_step": sizes,
                 "expect": "new shape at steps 0,2,4,6 (profiler steps); each new shape recompiles both frames"})


JOBS = [("conv", conv_train, 25), ("gpt_eager", lambda: gpt_train(False), 25), ("opmix", opmix, 20),
        ("backlog", backlog, 15), ("recompile", recompile, 40), ("gpt_compiled", lambda: gpt_train(True), 80),
        ("cudagraph", gpt_cudagraph, 50)]

if __name__ == "__main__":
    log("torch", torch.__version__, torch.cuda.get_device_name(0))
    for name, fn, need in JOBS:
        if left() < need:
            log("SKIP", name, "left", round(left()))
            TIMINGS.setdefault("skipped", []).append(name)
            continue
        try:
            log("start", name)
            fn()
        except Exception:
            log("FAIL", name)
            traceback.print_exc()
            TIMINGS.setdefault("failed", []).append(name)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    TIMINGS["total_s"] = round(time.time() - T0, 1)
    log("files", sorted(os.listdir(OUT)))
    print("TIMINGS_JSON_BEGIN")
    print(json.dumps(TIMINGS, separators=(",", ":")))
    print("TIMINGS_JSON_END")
