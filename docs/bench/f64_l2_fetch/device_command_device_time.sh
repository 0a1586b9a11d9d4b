. .run3/prefix.sh >/dev/null 2>&1
FINAL=$OUT; mkdir -p /tmp/kc /tmp/txt
tar -xJf .run3/kc1.tar.xz -C /tmp/kc
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > /tmp/txt/gpu.txt
export VARIANTS="f128:l2_fetch=128;f256:l2_fetch=256"
for t in fit held; do
  OUT=$FINAL TAG=l2_$t SHAPES=$(cat .run3/l2_$t.txt) timeout 250 python docs/bench/research/mma_whole_tiles.py > /tmp/txt/l2_$t.txt 2>&1
  echo "$t rc=$?" >> /tmp/txt/summary.txt; tail -6 /tmp/txt/l2_$t.txt >> /tmp/txt/summary.txt
done
cp /tmp/txt/summary.txt $FINAL/; tar -czf $FINAL/txt.tgz -C /tmp/txt .
