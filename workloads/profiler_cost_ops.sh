# The recordings of traces/h100/profiler_cost_ops (issue #27): the `ops` group of workloads/profiler_cost.py (what
# one event of each kind costs the profiler, and the Hugging Face Llama in the alternated protocol), then the same
# Llama training step recorded by `tracelens record` (its own protocol) on the same host. Run on the device from
# the repository root with msgspec's wheel carried in .whl/:
#   bash workloads/profiler_cost_ops.sh     ($OUT: where pc.tgz goes)
set -u
mkdir -p $OUT/x
python3 -m pip install -q --no-deps --target /tmp/site .whl/msgspec*.whl >/dev/null 2>&1
export PYTHONPATH=$PWD:/tmp/site
python3 setup.py build_ext --inplace -q >/dev/null 2>&1 || echo "no C extension" >> $OUT/x/record.log
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit,temperature.gpu --format=csv > $OUT/x/nvidia-smi.csv
python3 -c "import torch,transformers;print(torch.__version__,transformers.__version__,torch.cuda.get_device_name())" > $OUT/x/record.log
timeout 300 python3 -m workloads.profiler_cost --out $OUT/x --group ops --rounds 3 >> $OUT/x/record.log 2>&1
echo "rc=$? profiler_cost ops" >> $OUT/x/record.log
for r in 0; do
  timeout 90 python3 -m tracelens record -o $OUT/x/record --name hf_train_b1s128_r$r --no-analyze -- \
    python3 workloads/hf_record.py train --batch 1 --seq 128 >> $OUT/x/record.log 2>&1
  echo "rc=$? record r$r" >> $OUT/x/record.log
done
cd $OUT && tar czf pc.tgz x && rm -rf x
