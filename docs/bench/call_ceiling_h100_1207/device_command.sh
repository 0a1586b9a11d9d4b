set -x
. .run3/prefix.sh
R=/tmp/res; mkdir -p $R
mkdir -p /tmp/kc && tar -xJf .run3/kc70.tar.xz -C /tmp/kc
nvidia-smi --query-gpu=name --format=csv > $R/gpu.txt
B="timeout 80 python3 -m kgen bench calls matmul --fresh-inputs"
$B --random 12 --seed 115001 --dtype float32 --json $R/g_f32any.json > $R/g_f32any.txt 2>&1; tar -czf $OUT/results.tgz -C $R .
$B --random 8 --rows 1-16 --seed 115002 --weights --dtype float32 --json $R/g_f32few_col.json > $R/g_f32few_col.txt 2>&1
$B --random 8 --rows 1-16 --seed 115002 --dtype float32 --json $R/g_f32few_row.json > $R/g_f32few_row.txt 2>&1; tar -czf $OUT/results.tgz -C $R .
$B --random 8 --rows 1-16 --seed 115003 --weights --dtype bfloat16 --json $R/g_bf16few_col.json > $R/g_bf16few_col.txt 2>&1
$B --random 8 --rows 17-256 --seed 115004 --weights --dtype float64 --json $R/g_f64rows_col.json > $R/g_f64rows_col.txt 2>&1
$B --random 8 --rows 1-256 --multiple 64 --seed 115005 --weights --dtype float32 --json $R/g_f32model_col.json > $R/g_f32model_col.txt 2>&1; tar -czf $OUT/results.tgz -C $R .
cd docs/bench/research
for spec in "115002 float32 col" "115002 float32 row" "115003 bfloat16 col"; do set -- $spec
  OUT=$R SEED=$1 DTYPE=$2 ORDER=$3 COUNT=8 ROWS=1-16 TAG=$1_$2_$3 timeout 100 python3 call_ceiling.py > $R/ceiling_$1_$2_$3.txt 2>&1
  tar -czf $OUT/results.tgz -C $R .
done
grep -h "geomean\|geometric" $R/*.txt
