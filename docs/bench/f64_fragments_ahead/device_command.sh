# Call 5 (short): fragments_ahead (m16n8k8, float64) against the dispatched specs, fit then GPU
# property test then held out; then the public path on this tree and treeB (default k8fa, 2 an SM).
. .run3/prefix.sh >/dev/null 2>&1
FINAL=$OUT; R=/tmp/r; mkdir -p $R /tmp/kc
tar -xJf .run3/kc_fa.tar.xz -C /tmp/kc
finish() { tar czf $FINAL/all.tgz -C $R .; }
trap finish EXIT
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv >> $FINAL/summary.txt
V="k8fa:mma_shape=m16n8k8,fragments_ahead=True;k8fa2:mma_shape=m16n8k8,fragments_ahead=True,min_blocks=2"
run_part() {
  OUT=$R TAG=fa_$1 SHAPES=$(cat .run3/fa_$1.txt) VARIANTS="$V" timeout 90 python docs/bench/research/mma_whole_tiles.py > $R/fa_$1.txt 2>&1
  echo "$1 rc=$?" >> $FINAL/summary.txt; tail -4 $R/fa_$1.txt >> $FINAL/summary.txt; finish
}
run_part fit
KGEN_TC_EXAMPLES=30 timeout 50 python -m pytest -q tests/test_tensorcore_gpu.py -k fragments_ahead > $R/gpu_fa.txt 2>&1
echo "gpu fa rc=$?" >> $FINAL/summary.txt; tail -3 $R/gpu_fa.txt >> $FINAL/summary.txt; finish
run_part held
for t in A B; do
  P=/tmp/notriton:/tmp/site:$PWD; [ $t != A ] && P=/tmp/notriton:/tmp/site:$PWD/.run3/tree$t
  PYTHONPATH=$P timeout 25 python -m kgen bench calls matmul --random 8 --rows 65-256 --seed 99707 --fresh-inputs \
     --dtype float64 --json $R/pub_$t.json > $R/pub_$t.txt 2>&1
  echo "pub $t rc=$? $(grep -o '"geomean_x": [0-9.]*' $R/pub_$t.json | tail -1)" >> $FINAL/summary.txt; finish
done
