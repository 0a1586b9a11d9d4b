. .run3/prefix.sh >/dev/null 2>&1
mkdir -p /tmp/kc && tar -xJf .run3/kc14.tar.xz -C /tmp/kc
cd docs/bench/research
V="$(cat ../../../.run3/sp_variants.txt)"
TAG=spfit SHAPES=$(cat ../../../.run3/sp_fit.txt),$(cat ../../../.run3/sw_shapes.txt) VARIANTS="$V" timeout 280 python mma_whole_tiles.py > $OUT/spfit_log.txt 2>&1; echo "fit rc=$?" >> $OUT/spfit_log.txt
TAG=spheld SHAPES=$(cat ../../../.run3/sp_held.txt) VARIANTS="$V" timeout 250 python mma_whole_tiles.py > $OUT/spheld_log.txt 2>&1; echo "held rc=$?" >> $OUT/spheld_log.txt
