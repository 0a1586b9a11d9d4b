set -x
. .run3/prefix.sh
ROOT=$PWD
R=/tmp/res74; mkdir -p $R
mkdir -p /tmp/kc && tar -xJf .run3/kc72.tar.xz -C /tmp/kc && tar -xJf .run3/kc74.tar.xz -C /tmp/kc
nvidia-smi --query-gpu=name --format=csv > $R/gpu.txt
for round in 1 2; do for tree in cand main; do
  if [ $tree = main ]; then P=$ROOT; else P=$ROOT/.run3/cand; fi
  for dt in float64 float32; do
  (cd $P && PYTHONPATH=/tmp/site:$P timeout 60 python3 -m kgen bench calls matmul --shapes $(cat $ROOT/.run3/ab_$dt.txt) --fresh-inputs --dtype $dt --json $R/calls_${dt}_row_${tree}_$round.json > $R/calls_${dt}_row_${tree}_$round.txt 2>&1)
  (cd $P && PYTHONPATH=/tmp/site:$P timeout 60 python3 -m kgen bench calls matmul --shapes $(cat $ROOT/.run3/ab_$dt.txt) --weights --fresh-inputs --dtype $dt --json $R/calls_${dt}_col_${tree}_$round.json > $R/calls_${dt}_col_${tree}_$round.txt 2>&1)
  done
  tar -czf $OUT/results.tgz -C $R .
done; done
grep -h '"geomean_x"' $R/calls_*txt | head -20
