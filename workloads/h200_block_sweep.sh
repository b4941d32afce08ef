#!/bin/bash
# Records traces/h200/block/ and traces/h200/sweep/ (issue 17) on one GPU.
#   bash workloads/h200_block_sweep.sh OUT_DIR [LOG_DIR]      (from the repo root)
# PY (default python3) runs the recorder; EXTRA adds recorder options (e.g.
# EXTRA=--smoke for a CPU dry run).  The block group runs in one process; each
# sweep variant runs in its own process with empty Inductor and Triton cache
# folders, so its compiles inside the profiler window are cold.
set -u
OUT_DIR=${1:?usage: h200_block_sweep.sh OUT_DIR [LOG_DIR]}
LOG_DIR=${2:-$OUT_DIR}
PY=${PY:-python3}
EXTRA=${EXTRA:-}
mkdir -p "$OUT_DIR" "$LOG_DIR"
SMI=
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
        --format=csv -lms 250 >"$LOG_DIR/nvidia-smi_block_sweep.csv" 2>&1 &
    SMI=$!
fi
status=0
echo "== block group"
TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) \
    $PY -m workloads.record --variant '' --extras block $EXTRA --out "$OUT_DIR" || status=1
for v in eager liger compiled_static compiled_default; do
    echo "== shapes group: $v"
    TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) \
        $PY -m workloads.record --variant '' --extras shapes --shape-variants "$v" --merge-timings \
        --gpu-warmup-s 1 $EXTRA --out "$OUT_DIR" || status=1
done
[ -n "$SMI" ] && kill "$SMI"
exit $status
