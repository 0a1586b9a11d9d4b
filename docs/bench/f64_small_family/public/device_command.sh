# Next device call: the public call of float64 few-row products under 2^28 multiply-adds, main (A: the SIMT
# tiles) against branch f64-small-tensor (B: the tensor cores), alternating twice, both weight orders; then the
# branch's GPU tests. B runs from .run3/tb (git archive of the branch's kgen, templates, tests): `python -m`
# imports the working folder's kgen, so each tree runs from its own folder.
. .run3/prefix.sh >/dev/null 2>&1
FINAL=$OUT; ROOT=$PWD; mkdir -p /tmp/kc
tar -xJf .run3/kc_p.tar.xz -C /tmp/kc
S=$(cat .run3/small_shapes.txt)
for round in 1 2; do for t in A B; do for w in "" "--weights"; do
  dir=$ROOT; [ $t = B ] && dir=$ROOT/.run3/tb
  n=pub_${t}${w#--}_$round
  (cd $dir && PYTHONPATH=/tmp/notriton:/tmp/site timeout 60 python -m kgen bench calls matmul --shapes $S \
     --fresh-inputs --dtype float64 $w --json $FINAL/$n.json > /tmp/$n.txt 2>&1)
  echo "$n rc=$? $(grep -o '"geomean_x": [0-9.]*' $FINAL/$n.json | tail -1)" >> $FINAL/summary.txt
done; done; done
(cd $ROOT/.run3/tb && PYTHONPATH=/tmp/notriton:/tmp/site timeout 120 python -m pytest -q tests/test_tensorcore_gpu.py \
   -k "under_2_28 or float64" > $FINAL/gpu_branch.txt 2>&1); echo "gpu branch rc=$?" >> $FINAL/summary.txt
tail -2 $FINAL/gpu_branch.txt >> $FINAL/summary.txt
