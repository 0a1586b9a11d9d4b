# float64 products of 65-256 rows with a wave or more of 64 x 64 tiles: K whole (A: .run3/ta, the tree before)
# against K split past a wave (B: this tree), as users call them, alternating twice, both weight orders; then B's
# float64 GPU tests and a fresh 17-256 public draw (seed 99803) on B.
. .run3/prefix.sh >/dev/null 2>&1
FINAL=$OUT; ROOT=$PWD; R=/tmp/res; mkdir -p /tmp/kc $R
tar -xJf .run3/kc10.tar.xz -C /tmp/kc
S=$(cat .run3/ww_shapes.txt)
for round in 1 2; do for t in A B; do for w in "" "--weights"; do
  dir=$ROOT; [ $t = A ] && dir=$ROOT/.run3/ta
  n=ww_${t}${w#--}_$round
  (cd $dir && PYTHONPATH=/tmp/notriton:/tmp/site timeout 90 python -m kgen bench calls matmul --shapes $S \
     --fresh-inputs --dtype float64 $w --json $R/$n.json > $R/$n.txt 2>&1)
  echo "$n rc=$? $(grep -o '"geomean_x": [0-9.]*' $R/$n.json | tail -1)" >> $FINAL/summary.txt
done; done; done
for w in "" "--weights"; do
  n=pub_99803${w#--}
  timeout 120 python -m kgen bench calls matmul --random 10 --rows 17-256 --seed 99803 $w \
     --fresh-inputs --dtype float64 --json $R/$n.json > $R/$n.txt 2>&1
  echo "$n rc=$? $(grep -o '"geomean_x": [0-9.]*' $R/$n.json | tail -1)" >> $FINAL/summary.txt
done
timeout 300 python -m pytest -q tests/test_tensorcore_gpu.py -k "float64" > $R/gpu.txt 2>&1
echo "gpu rc=$?" >> $FINAL/summary.txt; tail -2 $R/gpu.txt >> $FINAL/summary.txt
tar -czf $FINAL/res.tgz -C $R .
