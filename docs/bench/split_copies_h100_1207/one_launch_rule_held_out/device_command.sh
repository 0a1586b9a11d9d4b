set -x
. .run3/prefix.sh
ROOT=$PWD
R=/tmp/res; mkdir -p $R
mkdir -p /tmp/kc && tar -xJf .run3/kc66.tar.xz -C /tmp/kc
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $R/gpu.txt
pack() { tar -czf $OUT/results.tgz -C $R . ; }
timeout 150 python3 -m pytest -q -m gpu tests/test_tensorcore_gpu.py -x -k "tensor_matmul_property or default_specs or large_float32" > $R/gpu_tests.txt 2>&1; echo "rc $?" >> $R/gpu_tests.txt; tail -2 $R/gpu_tests.txt
timeout 90 python3 docs/bench/research/sanitize_split_tf32.py > $R/sanitize_plain.txt 2>&1; echo "rc $?" >> $R/sanitize_plain.txt; tail -2 $R/sanitize_plain.txt
PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 150 compute-sanitizer --tool memcheck python3 docs/bench/research/sanitize_split_tf32.py > $R/sanitize_memcheck.txt 2>&1; echo "rc $?" >> $R/sanitize_memcheck.txt; tail -3 $R/sanitize_memcheck.txt
pack
for round in 1 2; do for tree in after before; do
  if [ $tree = after ]; then P=$ROOT; else P=$ROOT/.run3/base2; fi
  mkdir -p $R/dev_${tree}_$round
  (cd docs/bench/research && SHAPES=$(cat $ROOT/.run3/held.txt) ONLY=none OUT=$R/dev_${tree}_$round PYTHONPATH=/tmp/site:$P timeout 100 python3 short_k_split.py > $R/dev_${tree}_$round/log.txt 2>&1)
  tail -1 $R/dev_${tree}_$round/log.txt
done; pack; done
for tree in after before; do
  if [ $tree = after ]; then P=$ROOT; else P=$ROOT/.run3/base2; fi
  (cd $P && PYTHONPATH=/tmp/site:$P timeout 80 python3 -m kgen bench calls matmul --shapes $(cat $ROOT/.run3/held_row.txt) --fresh-inputs --dtype float32 --json $R/calls_row_${tree}_1.json > $R/calls_row_${tree}_1.txt 2>&1)
  (cd $P && PYTHONPATH=/tmp/site:$P timeout 80 python3 -m kgen bench calls matmul --shapes $(cat $ROOT/.run3/held_col.txt) --weights --fresh-inputs --dtype float32 --json $R/calls_col_${tree}_1.json > $R/calls_col_${tree}_1.txt 2>&1)
done; pack
grep -h "geomean" $R/calls_*txt | head -20
