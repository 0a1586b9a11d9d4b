. .run3/prefix.sh >/dev/null 2>&1
ROOT=$PWD; mkdir -p /tmp/kc /tmp/o && tar -xJf .run3/kc42.tar.xz -C /tmp/kc
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > /tmp/o/gpu.txt
pack() { cp /tmp/o/summary.txt $OUT/ 2>/dev/null; tar -czf $OUT/o10.tgz -C /tmp/o .; }
KGEN_TEST_SHARED_CACHE=1 KGEN_TC_EXAMPLES=30 timeout 90 python -m pytest -q -x -p no:cacheprovider tests/test_split_mma_gpu.py --junitxml=/tmp/o/split_mma_gpu.xml > /tmp/o/split_mma_gpu.txt 2>&1
echo "split mma tests rc=$? $(tail -1 /tmp/o/split_mma_gpu.txt) t=$SECONDS" >> /tmp/o/summary.txt; pack
SHAPES=$(cat .run3/f32_fit.txt) TAG=fit OUT=/tmp/o timeout 200 python docs/bench/research/split_mma.py > /tmp/o/split_mma_fit.txt 2>&1
echo "split mma fit rc=$? t=$SECONDS" >> /tmp/o/summary.txt; pack
KGEN_TEST_SHARED_CACHE=1 KGEN_TC_EXAMPLES=16 timeout 70 python -m pytest -q -p no:cacheprovider tests/test_few_columns_gpu.py --junitxml=/tmp/o/few_columns_gpu.xml > /tmp/o/few_columns_gpu.txt 2>&1
echo "few-column tests rc=$? $(tail -1 /tmp/o/few_columns_gpu.txt) t=$SECONDS" >> /tmp/o/summary.txt; pack
run() {  # tree tag args...
  tree=$1; tag=$2; shift 2
  if [ $tree = after ]; then P=/tmp/site:$ROOT; D=$ROOT; else P=/tmp/site:$ROOT/.run3/base; D=$ROOT/.run3/base; fi
  (cd $D && PYTHONPATH=$P timeout 40 python -m kgen bench calls matmul "$@" --fresh-inputs --dtype float64 --json /tmp/o/${tree}_${tag}_$rep.json > /tmp/o/${tree}_${tag}_$rep.txt 2>&1)
  echo "$tree $tag $rep rc=$? t=$SECONDS" >> /tmp/o/summary.txt
}
for rep in 1 2; do for tree in after before; do
  [ $SECONDS -gt 420 ] && break
  run $tree oddn --shapes $(cat .run3/fcb_val.txt); pack
done; done
KGEN_TEST_SHARED_CACHE=1 KGEN_DISPATCH_EXAMPLES=40 timeout $((575-SECONDS)) python -m pytest -q -p no:cacheprovider tests/test_dispatch_gpu.py --junitxml=/tmp/o/dispatch_gpu.xml > /tmp/o/dispatch_gpu.txt 2>&1
echo "dispatch tests rc=$? $(tail -1 /tmp/o/dispatch_gpu.txt) t=$SECONDS" >> /tmp/o/summary.txt; pack
