set -x
. .run3/prefix.sh
ROOT=$PWD
R=/tmp/res75; mkdir -p $R
mkdir -p /tmp/kc && tar -xJf .run3/kc72.tar.xz -C /tmp/kc && tar -xJf .run3/kc75.tar.xz -C /tmp/kc
nvidia-smi --query-gpu=name --format=csv > $R/gpu.txt
for round in 1 2; do for tree in cand main; do
  if [ $tree = main ]; then P=$ROOT; else P=$ROOT/.run3/cand; fi
  for set in a b; do
  (cd $P && PYTHONPATH=/tmp/site:$P timeout 60 python3 -m kgen bench calls matmul --shapes $(cat $ROOT/.run3/tiny_$set.txt) --fresh-inputs --dtype float64 --json $R/calls_${set}_row_${tree}_$round.json > $R/calls_${set}_row_${tree}_$round.txt 2>&1)
  (cd $P && PYTHONPATH=/tmp/site:$P timeout 60 python3 -m kgen bench calls matmul --shapes $(cat $ROOT/.run3/tiny_$set.txt) --weights --fresh-inputs --dtype float64 --json $R/calls_${set}_col_${tree}_$round.json > $R/calls_${set}_col_${tree}_$round.txt 2>&1)
  done
  tar -czf $OUT/results.tgz -C $R .
done; done
grep -h '"geomean_x"' $R/calls_*txt | head -20
