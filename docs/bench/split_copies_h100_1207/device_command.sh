set -x
. .run3/prefix.sh
ROOT=$PWD
R=/tmp/res; mkdir -p $R
mkdir -p /tmp/kc && tar -xJf .run3/kc62.tar.xz -C /tmp/kc
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $R/gpu.txt
pack() { tar -czf $OUT/results.tgz -C $R . ; }
for round in 1 2; do for tree in after before; do
  if [ $tree = after ]; then P=$ROOT; else P=$ROOT/.run3/base; fi
  mkdir -p $R/dev_${tree}_$round
  (cd docs/bench/research && SHAPES=$(cat $ROOT/.run3/split_shapes.txt) ONLY=wgsplit OUT=$R/dev_${tree}_$round PYTHONPATH=/tmp/site:$P timeout 150 python3 short_k_split.py > $R/dev_${tree}_$round/log.txt 2>&1)
  (cd $P && python3 -c "import kgen, sys; print(kgen.__file__)" > $R/dev_${tree}_$round/which.txt 2>&1)
done; pack; done
for round in 1 2; do for tree in after before; do
  if [ $tree = after ]; then P=$ROOT; else P=$ROOT/.run3/base; fi
  (cd $P && PYTHONPATH=/tmp/site:$P timeout 100 python3 -m kgen bench calls matmul --shapes $(cat $ROOT/.run3/split_row.txt) --fresh-inputs --dtype float32 --json $R/calls_row_${tree}_$round.json > $R/calls_row_${tree}_$round.txt 2>&1)
  (cd $P && PYTHONPATH=/tmp/site:$P timeout 100 python3 -m kgen bench calls matmul --shapes $(cat $ROOT/.run3/split_col.txt) --weights --fresh-inputs --dtype float32 --json $R/calls_col_${tree}_$round.json > $R/calls_col_${tree}_$round.txt 2>&1)
done; pack; done
grep -h "geomean" $R/calls_*txt | head -20
