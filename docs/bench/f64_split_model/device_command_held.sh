. .run3/prefix.sh >/dev/null 2>&1
mkdir -p /tmp/kc && tar -xJf .run3/kc15.tar.xz -C /tmp/kc
cd docs/bench/research
V="$(cat ../../../.run3/sp_variants2.txt)"
TAG=spheld2 SHAPES=$(cat ../../../.run3/sp_held2.txt) VARIANTS="$V" timeout 280 python mma_whole_tiles.py > $OUT/spheld2_log.txt 2>&1; echo "fit rc=$?" >> $OUT/spheld2_log.txt
