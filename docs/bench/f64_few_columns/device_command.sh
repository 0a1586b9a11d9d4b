. .run3/prefix.sh >/dev/null 2>&1
ROOT=$PWD; mkdir -p /tmp/kc /tmp/o && tar -xJf .run3/kc30.tar.xz -C /tmp/kc
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > /tmp/o/gpu.txt
pack() { cp /tmp/o/summary.txt $OUT/ 2>/dev/null; tar -czf $OUT/o.tgz -C /tmp/o .; }
# 1: GPU property tests of the few-column tiles
KGEN_TC_EXAMPLES=30 timeout 80 python -m pytest -q -p no:cacheprovider tests/test_few_columns_gpu.py > /tmp/o/gpu_tests.txt 2>&1
echo "tests rc=$? $(tail -1 /tmp/o/gpu_tests.txt) t=$SECONDS" >> /tmp/o/summary.txt; pack
# 2: device time of the few-column tiles against the spec dispatched as shipped
cd docs/bench/research
for set in "fcfit fc_fit 90" "fcheld fc_held 60"; do set -- $set
  PYTHONPATH=/tmp/site:$ROOT OUT=/tmp/o TAG=$1 SHAPES="$(cat $ROOT/.run3/$2.txt)" VARIANTS="$(cat $ROOT/.run3/fc_variants.txt)" timeout $3 python mma_whole_tiles.py > /tmp/o/$1_log.txt 2>&1
  echo "$1 rc=$? t=$SECONDS" >> /tmp/o/summary.txt; cd $ROOT; pack; cd docs/bench/research
done
cd $ROOT
# 3: public calls of the few-column held set: rule off, on with 64-row tiles, on with 128
for fc in 0 64 128; do
  E=""; [ $fc != 0 ] && E="KGEN_FC=$fc KGEN_FC_MAX=128"
  env $E PYTHONPATH=/tmp/site:$ROOT:$ROOT/.run3/site timeout 35 python -m kgen bench calls matmul --shapes $(cat .run3/fc_held_row.txt) --fresh-inputs --dtype float64 --json /tmp/o/fcpub_${fc}_row.json > /tmp/o/fcpub_${fc}_row.txt 2>&1
  echo "fcpub $fc row rc=$? t=$SECONDS" >> /tmp/o/summary.txt
  env $E PYTHONPATH=/tmp/site:$ROOT:$ROOT/.run3/site timeout 35 python -m kgen bench calls matmul --shapes $(cat .run3/fc_held_col.txt) --weights --fresh-inputs --dtype float64 --json /tmp/o/fcpub_${fc}_col.json > /tmp/o/fcpub_${fc}_col.txt 2>&1
  echo "fcpub $fc col rc=$? t=$SECONDS" >> /tmp/o/summary.txt
done; pack
# 4: held-out sweep of the public call on the tree as shipped (F64_FEW_COLUMNS off)
while read name d seed cnt rows mult w cols; do
  [ $SECONDS -gt 470 ] && { echo "$name skipped t=$SECONDS" >> /tmp/o/summary.txt; continue; }
  a="--random $cnt --seed $seed --dtype $d --fresh-inputs"
  [ "$rows" != - ] && a="$a --rows $rows"; [ "$mult" != 1 ] && a="$a --multiple $mult"
  [ "$w" = 1 ] && a="$a --weights"; [ "$cols" = 1 ] && a="$a --columns"
  timeout 40 python -m kgen bench calls matmul $a --json /tmp/o/sweep_$name.json > /tmp/o/sweep_$name.txt 2>&1
  echo "$name rc=$? t=$SECONDS $(python -c "import json;d=json.load(open('/tmp/o/sweep_$name.json'))['summary']['all'];print(d)" 2>&1)" >> /tmp/o/summary.txt
  pack
done < .run3/sets.txt
