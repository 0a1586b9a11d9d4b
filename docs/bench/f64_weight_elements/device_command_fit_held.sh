. .run3/prefix.sh >/dev/null 2>&1
mkdir -p /tmp/kc && tar -xJf .run3/kc10.tar.xz -C /tmp/kc
cd docs/bench/research
V="ra:repack_a=True;sp:spread_elements=True;both:repack_a=True,spread_elements=True"
TAG=elfit SHAPES=$(cat ../../../.run3/el_fit.txt) VARIANTS="$V" timeout 280 python mma_whole_tiles.py > $OUT/elfit_log.txt 2>&1; echo "fit rc=$?" >> $OUT/elfit_log.txt
TAG=elheld SHAPES=$(cat ../../../.run3/el_held.txt) VARIANTS="$V" timeout 280 python mma_whole_tiles.py > $OUT/elheld_log.txt 2>&1; echo "held rc=$?" >> $OUT/elheld_log.txt
