. .run3/prefix.sh >/dev/null 2>&1
ROOT=$PWD; mkdir -p /tmp/kc && tar -xJf .run3/kc17.tar.xz -C /tmp/kc
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
T0=$(date +%s)
(cd docs/bench/research && TAG=t128 SHAPES="$(cat $ROOT/.run3/shapes_t.txt)" VARIANTS="$(cat $ROOT/.run3/variants.txt)" timeout 230 python mma_whole_tiles.py > $OUT/tiles.txt 2>&1; echo "tiles rc=$? $(( $(date +%s) - T0 ))s" >> $OUT/summary.txt)
hs() { tag=$1; shift; timeout 55 python -m kgen bench calls matmul "$@" --json $OUT/hs_$tag.json > $OUT/hs_$tag.txt 2>&1; echo "$tag rc=$? $(( $(date +%s) - T0 ))s $(grep -i 'geomean\|geometric' $OUT/hs_$tag.txt | tail -1)" >> $OUT/summary.txt; }
hs f64mid --random 8 --rows 17-256 --seed 106008 --weights --fresh-inputs --dtype float64
hs f32few --random 8 --rows 1-16 --seed 106002 --weights --fresh-inputs --dtype float32
hs bf16few --random 8 --rows 1-16 --seed 106004 --multiple 64 --weights --fresh-inputs --dtype bfloat16
hs f32gen --random 8 --seed 106001 --dtype float32
hs bf16mid --random 8 --rows 17-256 --seed 106005 --fresh-inputs --dtype bfloat16
hs f32mid --random 8 --rows 17-256 --seed 106003 --weights --fresh-inputs --dtype float32
hs f16gen --random 8 --seed 106006 --dtype float16
hs f64gen --random 8 --seed 106007 --dtype float64
L=$(python -c "import random; r=random.Random(106201); print(','.join(str(int(10**r.uniform(3,8.6))) for _ in range(8)))")
timeout 60 python -m kgen bench calls reduce --lengths $L --json $OUT/hs_reduce.json > $OUT/hs_reduce.txt 2>&1; echo "reduce rc=$?" >> $OUT/summary.txt
cd $OUT && tar -czf all.tgz *.txt *.json && rm -f hs_* tiles.txt mma_whole*.json
