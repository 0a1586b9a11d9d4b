. .run3/prefix.sh >/dev/null 2>&1
mkdir -p /tmp/kc && tar -xJf .run3/kc4.tar.xz -C /tmp/kc
TAG=l1 SHAPES=$(cat .run3/l1_shapes.txt) VARIANTS="$(cat .run3/l1_variants.txt)" \
  timeout 400 python docs/bench/research/mma_whole_tiles.py > $OUT/l1.txt 2>&1
echo "rc=$?" >> $OUT/l1.txt
