"""Record the four traces under traces/h200/truth/ (issue 14: truth of findings) on one CUDA GPU.

    python scripts/record_truth_traces.py OUT_DIR      # needs torch with CUDA; never imported by tracelens

- sweep_static_compiled_mlp: a GeGLU MLP (hidden 1024, intermediate 4096, bf16) under
  torch.compile(dynamic=False), compiled for 256 tokens before the profiler starts, then one profiled step
  each for 512, 1024, 512, 2048, 4096, 8192 tokens (sync per step): five compiles inside the window (0/1..0/5),
  the repeat reuses 0/1.
- train_cpu_ahead_stacks: 6 x Linear(4096) bf16, batch 8192, AdamW(foreach=False), 20 profiled steps without a
  sync per step and with Python stacks: the GPU is the limiter and the CPU runs ahead (the queue grows).
- train_cpu_bound_stacks: the same loop with 12 x Linear(512), batch 64: CPU-bound, with Python stacks.
- gemm_gpu_ahead: four 8192^3 bf16 matmuls per step, 12 profiled steps, no sync: GPU-bound, CPU far ahead.
"""

import gzip, json, os, sys, time, shutil
import torch, torch.nn as nn
from torch.profiler import profile, ProfilerActivity, schedule

out = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", "/tmp/out")
os.makedirs(out, exist_ok=True)
dev = torch.device("cuda")
torch.manual_seed(0)

class MLP(nn.Module):
    def __init__(s, h=1024, i=4096):
        super().__init__(); s.up = nn.Linear(h, i, bias=False); s.gate = nn.Linear(h, i, bias=False); s.down = nn.Linear(i, h, bias=False)
    def forward(s, x):
        return s.down(torch.nn.functional.gelu(s.gate(x), approximate="tanh") * s.up(x))

def save(prof, name, meta):
    tmp = f"/tmp/{name}.json"
    prof.export_chrome_trace(tmp)
    d = json.load(open(tmp)); d["tracelens_run"] = meta
    with gzip.open(os.path.join(out, name + ".json.gz"), "wt") as f: json.dump(d, f)

m = MLP().to(dev, torch.bfloat16)
cm = torch.compile(m, dynamic=False)
tokens = [256, 512, 1024, 512, 2048, 4096, 8192]
xs = {t: torch.randn(t, 1024, device=dev, dtype=torch.bfloat16) for t in set(tokens)}
cm(xs[256]); torch.cuda.synchronize()
seq = tokens[1:]  # 512, 1024, 512(repeat), 2048, 4096, 8192 -> 5 new shapes
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
             schedule=schedule(wait=0, warmup=1, active=len(seq), repeat=1)) as prof:
    cm(xs[256]); torch.cuda.synchronize(); prof.step()
    for t in seq:
        cm(xs[t]); torch.cuda.synchronize(); prof.step()
save(prof, "sweep_static_compiled_mlp", {"variant": "sweep_static_compiled_mlp", "tokens": seq, "dynamic": False, "torch": torch.__version__})
print("sweep done")

torch._dynamo.reset()
def train(name, width, depth, batch):
    model = nn.Sequential(*[nn.Linear(width, width) for _ in range(depth)]).to(dev, torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
    x = torch.randn(batch, width, device=dev, dtype=torch.bfloat16)
    def step():
        opt.zero_grad(set_to_none=True)
        loss = model(x).float().square().mean(); loss.backward(); opt.step()
    for _ in range(5): step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True, with_stack=True, schedule=schedule(wait=0, warmup=2, active=20, repeat=1), on_trace_ready=lambda p: save(p, name, {"variant": name, "width": width, "depth": depth, "batch": batch, "sync_per_step": False, "with_stack": True, "torch": torch.__version__})) as prof:
        for _ in range(22):
            step(); prof.step()
    torch.cuda.synchronize()
train("train_cpu_ahead_stacks", 4096, 6, 8192)
train("train_cpu_bound_stacks", 512, 12, 64)
print("train done")
a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
for _ in range(3): a @ a
torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=schedule(wait=0, warmup=1, active=12, repeat=1)) as prof:
    for _ in range(13):
        for _ in range(4): b = a @ a
        prof.step()
    torch.cuda.synchronize()
save(prof, "gemm_gpu_ahead", {"variant": "gemm_gpu_ahead", "sync_per_step": False, "torch": torch.__version__})
print("gemm done")
for f in os.listdir(out): print(f, os.path.getsize(os.path.join(out, f)))