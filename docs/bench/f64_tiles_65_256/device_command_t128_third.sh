. .run3/prefix.sh >/dev/null 2>&1
mkdir -p /tmp/kc && tar -xJf .run3/kc8.tar.xz -C /tmp/kc
TAG=t128 SHAPES=$(cat .run3/t128_shapes.txt) VARIANTS="$(cat .run3/t128_variants.txt)" \
  timeout 200 python docs/bench/research/mma_whole_tiles.py > $OUT/t128.txt 2>&1
echo "rc=$?" >> $OUT/t128.txt
