. .run3/prefix.sh >/dev/null 2>&1
ROOT=$PWD; mkdir -p /tmp/kc /tmp/o && tar -xJf .run3/kc32.tar.xz -C /tmp/kc
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > /tmp/o/gpu.txt
pack() { cp /tmp/o/summary.txt $OUT/ 2>/dev/null; tar -czf $OUT/o.tgz -C /tmp/o .; }
KGEN_TC_EXAMPLES=30 timeout 90 python -m pytest -q -p no:cacheprovider tests/test_few_columns_gpu.py > /tmp/o/gpu_tests.txt 2>&1
echo "tests rc=$? $(tail -1 /tmp/o/gpu_tests.txt) t=$SECONDS" >> /tmp/o/summary.txt; pack
KGEN_TC_EXAMPLES=12 timeout 150 python -m pytest -q -p no:cacheprovider tests/test_tensorcore_gpu.py > /tmp/o/tc_tests.txt 2>&1
echo "tc tests rc=$? $(tail -1 /tmp/o/tc_tests.txt) t=$SECONDS" >> /tmp/o/summary.txt; pack
T0=$SECONDS
run() {  # tree tag args...
  tree=$1; tag=$2; shift 2
  if [ $tree = after ]; then P=/tmp/site:$ROOT; D=$ROOT; else P=/tmp/site:$ROOT/.run3/base; D=$ROOT/.run3/base; fi
  (cd $D && PYTHONPATH=$P timeout 40 python -m kgen bench calls matmul "$@" --fresh-inputs --dtype float64 --json /tmp/o/${tree}_${tag}_$rep.json > /tmp/o/${tree}_${tag}_$rep.txt 2>&1)
  echo "$tree $tag $rep rc=$? t=$SECONDS" >> /tmp/o/summary.txt
}
for rep in 1 2; do for tree in after before; do
  [ $((SECONDS-T0)) -gt 200 ] && break
  run $tree valrow --shapes $(cat .run3/fc_val.txt)
  run $tree valcol --shapes $(cat .run3/fc_val.txt) --weights
  run $tree any --random 8 --seed 108009
  run $tree fewcol --random 8 --seed 108013 --rows 9-128 --columns
  pack
done; done
