# float64 products of 17-32 rows (the 32-row few-row tiles), both weight orders: BK 32 with two stages, BK 32 with
# three stages at two blocks an SM, six stages at two blocks an SM, against the dispatched spec; device time.
. .run3/prefix.sh >/dev/null 2>&1
FINAL=$OUT; mkdir -p /tmp/kc /tmp/txt
tar -xJf .run3/kc13.tar.xz -C /tmp/kc
export VARIANTS="k32s2:tile=32/64/32,stages=2;k32s3b2:tile=32/64/32,stages=3,min_blocks=2;s6b2:stages=6,min_blocks=2"
for t in fit held; do
  OUT=$FINAL TAG=fr_$t SHAPES=$(cat .run3/fr_$t.txt) timeout 200 python docs/bench/research/mma_whole_tiles.py > /tmp/txt/fr_$t.txt 2>&1
  echo "$t rc=$?" >> /tmp/txt/summary.txt; tail -5 /tmp/txt/fr_$t.txt >> /tmp/txt/summary.txt
done
cp /tmp/txt/summary.txt $FINAL/; tar -czf $FINAL/txt.tgz -C /tmp/txt .
