set -x
. .run3/prefix.sh
ROOT=$PWD
R=/tmp/res76; mkdir -p $R
mkdir -p /tmp/kc && tar -xJf .run3/kc72.tar.xz -C /tmp/kc && tar -xJf .run3/kc76.tar.xz -C /tmp/kc
nvidia-smi --query-gpu=name --format=csv > $R/gpu.txt
timeout 150 python3 -m pytest -q -m gpu tests/test_skinny_gpu.py -k "float64_small" > $R/gpu_tests.txt 2>&1; tail -n 3 $R/gpu_tests.txt
tar -czf $OUT/results.tgz -C $R .
for tree in after before; do
  if [ $tree = after ]; then P=$ROOT; else P=$ROOT/.run3/base; fi
  (cd $P && PYTHONPATH=/tmp/site:$P timeout 60 python3 -m kgen bench calls matmul --shapes $(cat $ROOT/.run3/tiny_c.txt) --fresh-inputs --dtype float64 --json $R/calls_c_row_${tree}.json > $R/calls_c_row_${tree}.txt 2>&1)
  (cd $P && PYTHONPATH=/tmp/site:$P timeout 60 python3 -m kgen bench calls matmul --shapes $(cat $ROOT/.run3/tiny_c.txt) --weights --fresh-inputs --dtype float64 --json $R/calls_c_col_${tree}.json > $R/calls_c_col_${tree}.txt 2>&1)
  tar -czf $OUT/results.tgz -C $R .
done
grep -h '"geomean_x"' $R/calls_*txt
