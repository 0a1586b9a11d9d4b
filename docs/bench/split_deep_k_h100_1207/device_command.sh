set -x
. .run3/prefix.sh
ROOT=$PWD
R=/tmp/res; mkdir -p $R
mkdir -p /tmp/kc && tar -xJf .run3/kc70.tar.xz -C /tmp/kc
nvidia-smi --query-gpu=name --format=csv > $R/gpu.txt
ROW=$(cat .run3/r1_row.txt),$(cat .run3/r2_row.txt); COL=$(cat .run3/r1_col.txt),$(cat .run3/r2_col.txt)
for round in 1 2; do for tree in cand main; do
  if [ $tree = main ]; then P=$ROOT; else P=$ROOT/.run3/cand; fi
  (cd $P && PYTHONPATH=/tmp/site:$P timeout 70 python3 -m kgen bench calls matmul --shapes $ROW --fresh-inputs --dtype float32 --json $R/calls_row_${tree}_$round.json > $R/calls_row_${tree}_$round.txt 2>&1)
  (cd $P && PYTHONPATH=/tmp/site:$P timeout 70 python3 -m kgen bench calls matmul --shapes $COL --weights --fresh-inputs --dtype float32 --json $R/calls_col_${tree}_$round.json > $R/calls_col_${tree}_$round.txt 2>&1)
  tar -czf $OUT/results.tgz -C $R .
done; done
grep -h geomean $R/calls_*txt | head
