. .run3/prefix.sh >/dev/null 2>&1
ROOT=$PWD; mkdir -p /tmp/kc /tmp/o && tar -xJf .run3/kc51.tar.xz -C /tmp/kc
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > /tmp/o/gpu.txt
pack() { cp /tmp/o/summary.txt $OUT/ 2>/dev/null; tar -czf $OUT/o2.tgz -C /tmp/o .; }
(cd docs/bench/research && for s in 110005 110006; do OUT=/tmp/o SEED=$s COUNT=14 KMIN=97 KMAX=200 ONLY=mma64,mma64k16b4,wgsplit timeout 120 python short_k_split.py > /tmp/o/short_k_split_$s.txt 2>&1; echo rc=$? >> /tmp/o/short_k_split_$s.txt; echo "study $s t=$SECONDS" >> /tmp/o/summary.txt; pack; done)
hb() { tag=$1; shift; timeout 100 python -m kgen bench calls matmul "$@" --fresh-inputs --json /tmp/o/held_$tag.json > /tmp/o/held_$tag.txt 2>&1; echo "held $tag rc=$? t=$SECONDS" >> /tmp/o/summary.txt; pack; }
hb f64rows --random 8 --rows 17-256 --weights --seed 113002 --dtype float64
hb f32few --random 8 --rows 1-16 --weights --seed 113003 --dtype float32
hb bf16few --random 8 --rows 1-16 --weights --seed 113004 --dtype bfloat16
hb f32any --random 12 --seed 113001 --dtype float32
cat /tmp/o/summary.txt; for f in /tmp/o/short_k_split_*.txt; do tail -6 $f; done; for f in /tmp/o/held_*.txt; do tail -4 $f; done
