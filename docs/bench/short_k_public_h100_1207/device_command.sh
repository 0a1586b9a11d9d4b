. .run3/prefix.sh >/dev/null 2>&1
ROOT=$PWD; mkdir -p /tmp/kc /tmp/o && tar -xJf .run3/kc49.tar.xz -C /tmp/kc
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > /tmp/o/gpu.txt
pack() { cp /tmp/o/summary.txt $OUT/ 2>/dev/null; tar -czf $OUT/o24.tgz -C /tmp/o .; }
KGEN_TEST_SHARED_CACHE=1 KGEN_TC_EXAMPLES=30 timeout 60 python -m pytest -q -p no:cacheprovider tests/test_split_mma_gpu.py > /tmp/o/split_mma_gpu.txt 2>&1
echo "split mma tests rc=$? $(tail -1 /tmp/o/split_mma_gpu.txt) t=$SECONDS" >> /tmp/o/summary.txt; pack
run() {  # tree tag args...
  tree=$1; tag=$2; shift 2
  if [ $tree = after ]; then P=/tmp/site:$ROOT; D=$ROOT; else P=/tmp/site:$ROOT/.run3/base; D=$ROOT/.run3/base; fi
  (cd $D && PYTHONPATH=$P timeout 40 python -m kgen bench calls matmul "$@" --fresh-inputs --dtype float32 --json /tmp/o/${tree}_${tag}_$rep.json > /tmp/o/${tree}_${tag}_$rep.txt 2>&1)
  echo "$tree $tag $rep rc=$? t=$SECONDS" >> /tmp/o/summary.txt
}
for rep in 1 2; do for tree in after before; do
  [ $SECONDS -gt 230 ] && break
  run $tree ska --shapes $(cat .run3/sk_a.txt)
  run $tree skawt --shapes $(cat .run3/sk_a.txt) --weights
  run $tree skb --shapes $(cat .run3/sk_b.txt)
  run $tree skbwt --shapes $(cat .run3/sk_b.txt) --weights
  pack
done; done
cat /tmp/o/summary.txt
