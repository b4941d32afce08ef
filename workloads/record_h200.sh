# The H200 recordings of traces/h200/record2 (2026-12-07): `tracelens record` as a user runs it, closing analysis
# included, on the Hugging Face Llama training step and the tiny example, after the recorder's line changed to
# compare one clock only. Run on the device from the repository root with msgspec's wheel carried in .whl/:
#   bash workloads/record_h200.sh     ($OUT: where the traces and record.log go)
set -u
python3 -m pip install -q --no-deps --target /tmp/site .whl/msgspec*.whl >/dev/null 2>&1
export PYTHONPATH=$PWD:/tmp/site
python3 setup.py build_ext --inplace -q >/dev/null 2>&1 || export TRACELENS_NO_NATIVE=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit,temperature.gpu --format=csv > $OUT/nvidia-smi.csv
python3 -c "import torch,transformers;print(torch.__version__,transformers.__version__,torch.cuda.get_device_name())" > $OUT/record.log
T0=$(date +%s)
rec() { name=$1; shift; echo "== $name $(date -u +%H:%M:%S)" >> $OUT/record.log
  left=$(( 500 - ($(date +%s) - T0) )); [ "$left" -ge 30 ] || { echo "rc=skipped $name: no time left" >> $OUT/record.log; return; }
  COLUMNS=80 timeout $left python3 -m tracelens record -o $OUT --name $name -- "$@" >> $OUT/record.log 2>&1
  echo "rc=$? $name $(( $(date +%s) - T0 ))s" >> $OUT/record.log; }
rec train_tiny python3 examples/train_tiny.py --hidden 1024 --batch 512
rec hf_llama_train python3 workloads/hf_record.py train
grep -E "^==|^rc=|profiler-free|^What to do|^Without" $OUT/record.log
