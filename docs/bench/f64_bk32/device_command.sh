# float64 products of 97-256 rows with K >= 4096, both weight orders: BK 32 (two stages; three at two blocks an
# SM), four stages, a column raster against the dispatched spec, device time; fit (seed 98901), held out (98902).
. .run3/prefix.sh >/dev/null 2>&1
FINAL=$OUT; mkdir -p /tmp/kc /tmp/txt
tar -xJf .run3/kc11.tar.xz -C /tmp/kc
export VARIANTS="k32s2:tile=64/64/32,stages=2;k32b2:tile=64/64/32,stages=3,min_blocks=2;s4:stages=4;rcol:raster=col"
for t in fit held; do
  OUT=$FINAL TAG=bk_$t SHAPES=$(cat .run3/bk_$t.txt) timeout 280 python docs/bench/research/mma_whole_tiles.py > /tmp/txt/bk_$t.txt 2>&1
  echo "$t rc=$?" >> /tmp/txt/summary.txt; tail -6 /tmp/txt/bk_$t.txt >> /tmp/txt/summary.txt
done
cp /tmp/txt/summary.txt $FINAL/; tar -czf $FINAL/txt.tgz -C /tmp/txt .
