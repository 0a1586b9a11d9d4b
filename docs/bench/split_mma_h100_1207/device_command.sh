. .run3/prefix.sh >/dev/null 2>&1
ROOT=$PWD; mkdir -p /tmp/kc /tmp/o && tar -xJf .run3/kc45.tar.xz -C /tmp/kc
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > /tmp/o/gpu.txt
pack() { cp /tmp/o/summary.txt $OUT/ 2>/dev/null; tar -czf $OUT/o13.tgz -C /tmp/o .; }
KGEN_TEST_SHARED_CACHE=1 KGEN_TC_EXAMPLES=60 timeout 60 python -m pytest -q -p no:cacheprovider tests/test_split_mma_gpu.py --junitxml=/tmp/o/split_mma_gpu.xml > /tmp/o/split_mma_gpu.txt 2>&1
echo "split mma tests rc=$? $(tail -1 /tmp/o/split_mma_gpu.txt) t=$SECONDS" >> /tmp/o/summary.txt; pack
run() {  # tree tag args...
  tree=$1; tag=$2; shift 2
  if [ $tree = after ]; then P=/tmp/site:$ROOT; D=$ROOT; else P=/tmp/site:$ROOT/.run3/base; D=$ROOT/.run3/base; fi
  (cd $D && PYTHONPATH=$P timeout 40 python -m kgen bench calls matmul "$@" --fresh-inputs --dtype float32 --json /tmp/o/${tree}_${tag}_$rep.json > /tmp/o/${tree}_${tag}_$rep.txt 2>&1)
  echo "$tree $tag $rep rc=$? t=$SECONDS" >> /tmp/o/summary.txt
}
for rep in 1 2; do for tree in after before; do
  [ $SECONDS -gt 330 ] && break
  run $tree rule2 --shapes $(cat .run3/split_val2.txt)
  run $tree rule2wt --shapes $(cat .run3/split_val2.txt) --weights
  run $tree any2 --random 16 --seed 109502
  pack
done; done
KGEN_TEST_SHARED_CACHE=1 KGEN_TC_EXAMPLES=10 timeout 100 python -m pytest -q -p no:cacheprovider tests/test_tensorcore_rows192_gpu.py > /tmp/o/rows192.txt 2>&1
echo "rows192 rc=$? $(tail -1 /tmp/o/rows192.txt) t=$SECONDS" >> /tmp/o/summary.txt; pack
