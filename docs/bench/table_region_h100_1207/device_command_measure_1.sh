set -x
. .run3/prefix.sh
R=/tmp/res72; mkdir -p $R
mkdir -p /tmp/kc && tar -xJf .run3/kc72.tar.xz -C /tmp/kc
nvidia-smi --query-gpu=name --format=csv > $R/gpu.txt
cp docs/bench/corpus/h100_matmul_float64.json $R/mm_f64.json
cp docs/bench/corpus/h100_matmul_float32.json $R/mm_f32.json
timeout 280 python3 -m kgen.tune.corpus measure --family matmul --dtype float64 --region table --count 80 --seed 2027 --budget 240 --out $R/mm_f64.json > $R/measure_f64.log 2>&1
tar -czf $OUT/results.tgz -C $R .
timeout 230 python3 -m kgen.tune.corpus measure --family matmul --dtype float32 --region table --count 80 --seed 2027 --budget 190 --out $R/mm_f32.json > $R/measure_f32.log 2>&1
tar -czf $OUT/results.tgz -C $R .
tail -2 $R/measure_f64.log $R/measure_f32.log
