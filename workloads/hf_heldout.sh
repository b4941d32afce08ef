# The H100 recordings of traces/h100/record (issues #27, #28): Hugging Face training eager and compiled, one
# `tracelens record` process per trace, each bounded so the whole call ends within the device's time (230 s of
# recording). Run on the device from the repository root with msgspec's wheel carried in .whl/:
#   bash workloads/hf_heldout.sh     ($OUT: where the traces and record.log go)
set -u
python3 -m pip install -q --no-deps --target /tmp/site .whl/msgspec*.whl >/dev/null 2>&1
export PYTHONPATH=$PWD:/tmp/site
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit,temperature.gpu --format=csv > $OUT/nvidia-smi.csv
python3 -c "import torch,transformers;print(torch.__version__,transformers.__version__,torch.cuda.get_device_name())" >> $OUT/record.log
T0=$(date +%s)
rec() { name=$1; shift; echo "== $name $(date -u +%H:%M:%S)" >> $OUT/record.log
  left=$(( 230 - ($(date +%s) - T0) )); [ "$left" -ge 10 ] || { echo "rc=skipped $name: no time left" >> $OUT/record.log; return; }
  timeout $left python3 -m tracelens record -o $OUT --name $name --no-analyze -- python3 workloads/hf_record.py train "$@" >> $OUT/record.log 2>&1; echo "rc=$? $name $(( $(date +%s) - T0 ))s" >> $OUT/record.log; }
rec hf_llama_train_b1s128_eager --batch 1 --seq 128
rec hf_llama_train_b1s128_compiled --batch 1 --seq 128 --compile
rec hf_gpt2_train_eager --model gpt2
rec hf_gpt2_train_compiled --model gpt2 --compile
rec hf_llama_train_eager
rec hf_llama_train_compiled --compile
grep -E "^==|^rc=|profiler-free" $OUT/record.log
