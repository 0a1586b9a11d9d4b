# float64 products of 65-256 rows whose 64 x 64 tiles make 1.0-1.67 waves (396-660 tiles): the dispatched spec
# against K split 2 and 3 ways and two blocks an SM, device time; fit (seed 98801) and held out (98802).
. .run3/prefix.sh >/dev/null 2>&1
FINAL=$OUT; mkdir -p /tmp/kc /tmp/txt
tar -xJf .run3/kc9.tar.xz -C /tmp/kc
export VARIANTS="s2:split_k=2;s3:split_k=3;b2:min_blocks=2"
for t in fit held; do
  OUT=$FINAL TAG=wt_$t SHAPES=$(cat .run3/wt_$t.txt) timeout 280 python docs/bench/research/mma_whole_tiles.py > /tmp/txt/wt_$t.txt 2>&1
  echo "$t rc=$?" >> /tmp/txt/summary.txt; tail -4 /tmp/txt/wt_$t.txt >> /tmp/txt/summary.txt
done
cp /tmp/txt/summary.txt $FINAL/; tar -czf $FINAL/txt.tgz -C /tmp/txt .
