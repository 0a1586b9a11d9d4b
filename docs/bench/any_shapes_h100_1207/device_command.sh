set -x
. .run3/prefix.sh
R=/tmp/res71; mkdir -p $R
mkdir -p /tmp/kc && tar -xJf .run3/kc71.tar.xz -C /tmp/kc
nvidia-smi --query-gpu=name --format=csv > $R/gpu.txt
git log --oneline -1 > $R/tree.txt
timeout 150 python3 -m pytest -q -m gpu tests/test_tensorcore_gpu.py -x -k "large_float32 or default_specs" > $R/gpu_tests.txt 2>&1; tail -2 $R/gpu_tests.txt
tar -czf $OUT/results.tgz -C $R .
B="timeout 80 python3 -m kgen bench calls matmul --fresh-inputs"
$B --random 12 --seed 115101 --dtype float64 --json $R/h_f64any_row.json > $R/h_f64any_row.txt 2>&1
$B --random 12 --seed 115101 --weights --dtype float64 --json $R/h_f64any_col.json > $R/h_f64any_col.txt 2>&1; tar -czf $OUT/results.tgz -C $R .
$B --random 12 --seed 115102 --dtype bfloat16 --json $R/h_bf16any_row.json > $R/h_bf16any_row.txt 2>&1
$B --random 12 --seed 115103 --weights --dtype float16 --json $R/h_f16any_col.json > $R/h_f16any_col.txt 2>&1
$B --random 12 --seed 115104 --weights --dtype float32 --json $R/h_f32any_col.json > $R/h_f32any_col.txt 2>&1
tar -czf $OUT/results.tgz -C $R .
grep -h '"geomean_x"' $R/h_*.txt
