set -x
. .run3/prefix.sh
R=/tmp/res73; mkdir -p $R
mkdir -p /tmp/kc && tar -xJf .run3/kc72.tar.xz -C /tmp/kc
nvidia-smi --query-gpu=name --format=csv > $R/gpu.txt
cp .run3/mm_f64.json .run3/mm_f32.json $R/
timeout 200 python3 -m kgen.tune.corpus measure --family matmul --dtype float64 --region table --count 400 --seed 2027 --budget 180 --out $R/mm_f64.json > $R/measure_f64.log 2>&1
tar -czf $OUT/results.tgz -C $R .
timeout 200 python3 -m kgen.tune.corpus measure --family matmul --dtype float32 --region table --count 400 --seed 2027 --budget 180 --out $R/mm_f32.json > $R/measure_f32.log 2>&1
tar -czf $OUT/results.tgz -C $R .
tail -n 2 $R/measure_f64.log $R/measure_f32.log
