. .run3/prefix.sh >/dev/null 2>&1
mkdir -p /tmp/kc && tar -xJf .run3/kc2.tar.xz -C /tmp/kc
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
TAG=rows_fit2 SHAPES=$(cat .run3/rows_fit2.txt) VARIANTS="$(cat .run3/rows_variants2.txt)" \
  timeout 520 python docs/bench/research/mma_whole_tiles.py > $OUT/rows_fit2.txt 2>&1
echo "rc=$?" >> $OUT/rows_fit2.txt
