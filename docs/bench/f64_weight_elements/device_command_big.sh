. .run3/prefix.sh >/dev/null 2>&1
mkdir -p /tmp/kc && tar -xJf .run3/kc11.tar.xz -C /tmp/kc
cd docs/bench/research
TAG=elbig SHAPES=$(cat ../../../.run3/el_big.txt) VARIANTS="off:repack_a=False,spread_elements=False" timeout 400 python mma_whole_tiles.py > $OUT/elbig_log.txt 2>&1; echo "big rc=$?" >> $OUT/elbig_log.txt
