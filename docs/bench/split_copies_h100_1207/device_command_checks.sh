set -x
. .run3/prefix.sh
ROOT=$PWD
mkdir -p /tmp/kc && tar -xJf .run3/kc62.tar.xz -C /tmp/kc
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $OUT/gpu.txt
pack() { tar -czf $OUT/results.tgz -C $OUT --exclude results.tgz . 2>/dev/null; }
# 1. correctness of the two-segment copies (this tree)
timeout 200 python3 -m pytest -q -m gpu tests/test_tensorcore_gpu.py -x -k "tensor_matmul_property or default_specs or large_float32" > $OUT/gpu_tests.txt 2>&1; echo "rc $?" >> $OUT/gpu_tests.txt; tail -3 $OUT/gpu_tests.txt
timeout 120 python3 docs/bench/research/sanitize_split_tf32.py > $OUT/sanitize_plain.txt 2>&1; echo "rc $?" >> $OUT/sanitize_plain.txt; tail -2 $OUT/sanitize_plain.txt
PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 200 compute-sanitizer --tool memcheck python3 docs/bench/research/sanitize_split_tf32.py > $OUT/sanitize_memcheck.txt 2>&1; echo "rc $?" >> $OUT/sanitize_memcheck.txt; tail -3 $OUT/sanitize_memcheck.txt
pack
# 2. device time, both trees alternating (after, before, after, before)
for round in 1 2; do for tree in after before; do
  if [ $tree = after ]; then P=$ROOT; else P=$ROOT/.run3/base; fi
  mkdir -p $OUT/dev_${tree}_$round
  (cd docs/bench/research && SHAPES=$(cat $ROOT/.run3/split_shapes.txt) ONLY=wgsplit OUT=$OUT/dev_${tree}_$round PYTHONPATH=/tmp/site:$P timeout 150 python3 short_k_split.py > $OUT/dev_${tree}_$round/log.txt 2>&1)
done; done
pack
# 3. as users call, both trees twice
for round in 1 2; do for tree in after before; do
  if [ $tree = after ]; then P=$ROOT; else P=$ROOT/.run3/base; fi
  PYTHONPATH=/tmp/site:$P timeout 100 python3 -m kgen bench calls matmul --shapes $(cat .run3/split_row.txt) --fresh-inputs --dtype float32 --json $OUT/calls_row_${tree}_$round.json > $OUT/calls_row_${tree}_$round.txt 2>&1
  PYTHONPATH=/tmp/site:$P timeout 100 python3 -m kgen bench calls matmul --shapes $(cat .run3/split_col.txt) --weights --fresh-inputs --dtype float32 --json $OUT/calls_col_${tree}_$round.json > $OUT/calls_col_${tree}_$round.txt 2>&1
done; done
pack
grep -h "geomean" -A0 $OUT/calls_*txt | head
