#!/bin/bash
# One recording session: eager/compiled twins of the decoder block at sizes and a kind tracelens' fusion
# model was not developed on. Writes $OUT/traces.tgz (traces, timings.json, logs, nvidia-smi samples).
set -u
R=/tmp/rec
mkdir -p $R
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv -lms 250 > $R/nvidia-smi_block_sizes.csv 2>&1 &
SMI=$!
run() {  # name, recorder options
    local name=$1; shift
    echo "== $name: $*" | tee -a $R/record_block_sizes.log
    TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 \
        timeout 150 python3 -m workloads.record --variant '' --extras block --block-variants eager,compiled \
        "$@" --out $R/$name >> $R/record_block_sizes.log 2>&1
    echo "== $name: exit $?" | tee -a $R/record_block_sizes.log
}
run llama_h4096 --block-hidden 4096 --block-heads 32 --block-intermediate 11008 --block-batch 1 --block-seq 2048
run llama_h1536 --block-hidden 1536 --block-heads 12 --block-intermediate 4096 --block-batch 4 --block-seq 2048
run gpt_h2048 --block-kind gpt --block-hidden 2048 --block-heads 16 --block-intermediate 8192 --block-batch 2 --block-seq 2048
kill $SMI
nvidia-smi > $R/nvidia-smi.txt 2>&1
tar czf $OUT/traces.tgz -C $R .
ls -la $R/*/block/ ; tail -5 $R/record_block_sizes.log
