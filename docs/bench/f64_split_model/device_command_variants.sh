. .run3/prefix.sh >/dev/null 2>&1
mkdir -p /tmp/kc && tar -xJf .run3/kc13.tar.xz -C /tmp/kc
cd docs/bench/research
TAG=sweep SHAPES=$(cat ../../../.run3/sw_shapes.txt) VARIANTS="$(cat ../../../.run3/sw_variants.txt)" timeout 500 python mma_whole_tiles.py > $OUT/sweep_log.txt 2>&1; echo "sweep rc=$?" >> $OUT/sweep_log.txt
