# The recordings of traces/h100/record2 (2026-12-07; asked for an H200, the device gave an H100): `tracelens record` as a user runs it, closing analysis
# included, on the tiny example and the Hugging Face Llama training step (docs/record.md opens with its log), then
# Hugging Face training twins eager and compiled with `--no-analyze` (held out: recorded after the step graph's
# backward handoff and every constant; docs/actions.md). Run on the device from the repository root with
# msgspec's wheel carried in .whl/:
#   bash workloads/record_h200.sh     ($OUT: where the traces and record.log go)
set -u
python3 -m pip install -q --no-deps --target /tmp/site .whl/msgspec*.whl >/dev/null 2>&1
export PYTHONPATH=$PWD:/tmp/site
python3 setup.py build_ext --inplace -q >/dev/null 2>&1 || echo "no C extension: analysis skipped" >> $OUT/record.log
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit,temperature.gpu --format=csv > $OUT/nvidia-smi.csv
python3 -c "import torch,transformers;print(torch.__version__,transformers.__version__,torch.cuda.get_device_name())" > $OUT/record.log
T0=$(date +%s)
rec() { name=$1; budget=$2; shift 2; echo "== $name $(date -u +%H:%M:%S)" >> $OUT/record.log
  left=$(( budget - ($(date +%s) - T0) )); [ "$left" -ge 30 ] || { echo "rc=skipped $name: no time left" >> $OUT/record.log; return; }
  COLUMNS=80 timeout $left python3 -m tracelens record -o $OUT --name $name "$@" >> $OUT/record.log 2>&1
  echo "rc=$? $name $(( $(date +%s) - T0 ))s" >> $OUT/record.log; }
rec train_tiny 200 -- python3 examples/train_tiny.py --hidden 1024 --batch 512
rec hf_llama_train 300 -- python3 workloads/hf_record.py train
rec hf_llama_train_b1s128_eager 430 --no-analyze -- python3 workloads/hf_record.py train --batch 1 --seq 128
rec hf_llama_train_b1s128_compiled 500 --no-analyze -- python3 workloads/hf_record.py train --batch 1 --seq 128 --compile
rec hf_gpt2_train_eager 530 --no-analyze -- python3 workloads/hf_record.py train --model gpt2
rec hf_gpt2_train_compiled 560 --no-analyze -- python3 workloads/hf_record.py train --model gpt2 --compile
grep -E "^==|^rc=|profiler-free|^What to do|^Without" $OUT/record.log
