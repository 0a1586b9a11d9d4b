. .run3/prefix.sh >/dev/null 2>&1
ROOT=$PWD; mkdir -p /tmp/kc /tmp/o && tar -xJf .run3/kc32.tar.xz -C /tmp/kc && tar -xJf .run3/kc40.tar.xz -C /tmp/kc
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > /tmp/o/gpu.txt
pack() { cp /tmp/o/summary.txt $OUT/ 2>/dev/null; tar -czf $OUT/o.tgz -C /tmp/o .; }
# 1: GPU tests of the few-column tiles: fixed specs (cluster merges of 16-64 columns) and kgen.matmul as dispatched
KGEN_TC_EXAMPLES=30 timeout 200 python -m pytest -q -p no:cacheprovider tests/test_few_columns_gpu.py --junitxml=/tmp/o/gpu_tests.xml > /tmp/o/gpu_tests.txt 2>&1
echo "tests rc=$? $(tail -1 /tmp/o/gpu_tests.txt) t=$SECONDS" >> /tmp/o/summary.txt; pack
# 2: public calls before (c4c5890) and after, float64 few-column and any-shape draws
run() {  # tree tag args...
  tree=$1; tag=$2; shift 2
  if [ $tree = after ]; then P=/tmp/site:$ROOT; D=$ROOT; else P=/tmp/site:$ROOT/.run3/base; D=$ROOT/.run3/base; fi
  (cd $D && PYTHONPATH=$P timeout 60 python -m kgen bench calls matmul "$@" --fresh-inputs --dtype float64 --json /tmp/o/${tree}_${tag}.json > /tmp/o/${tree}_${tag}.txt 2>&1)
  echo "$tree $tag rc=$? t=$SECONDS" >> /tmp/o/summary.txt
}
for tree in after before; do
  run $tree valrow --shapes $(cat .run3/fc_val.txt)
  run $tree valcol --shapes $(cat .run3/fc_val.txt) --weights
  run $tree any --random 8 --seed 108009
  run $tree fewcol --random 8 --seed 108013 --rows 9-128 --columns
  pack
done
# 3: compute-sanitizer over the specs dispatch picks for 45 random products
timeout $((560 - SECONDS)) python scripts/sanitize --no-reduce --dispatch-sample 45 --matmul-sample 0 --skinny-sample 0 --tensor-sample 0 --tools memcheck,racecheck --log /tmp/o/sanitize.log --timeout 150 > /tmp/o/sanitize.txt 2>&1
echo "sanitize rc=$? $(tail -2 /tmp/o/sanitize.txt | head -1) t=$SECONDS" >> /tmp/o/summary.txt
xz -9 /tmp/o/sanitize.log; pack
