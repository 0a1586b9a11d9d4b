. .run3/prefix.sh >/dev/null 2>&1
ROOT=$PWD; mkdir -p /tmp/kc /tmp/o && tar -xJf .run3/kc20.tar.xz -C /tmp/kc
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > /tmp/o/gpu.txt
cd docs/bench/research
OUT=/tmp/o TAG=cm SHAPES="$(cat $ROOT/.run3/cm_shapes.txt)" VARIANTS="ws:split_merge=workspace" timeout 240 python mma_whole_tiles.py > /tmp/o/cm_log.txt 2>&1
echo "cm rc=$?" >> /tmp/o/summary.txt; tail -3 /tmp/o/cm_log.txt >> /tmp/o/summary.txt
cd $ROOT; cp /tmp/o/summary.txt $OUT/; tar -czf $OUT/o.tgz -C /tmp/o .
run() {  # tree seed rows weights
  tag=$1_$2$4
  if [ $1 = after ]; then
    timeout 60 python -m kgen bench calls matmul --random 10 --rows $3 --seed $2 $4 --fresh-inputs --dtype float64 --json /tmp/o/$tag.json > /tmp/o/$tag.txt 2>&1
  else
    (cd $ROOT/.run3/base && PYTHONPATH=/tmp/site:$ROOT/.run3/base timeout 60 python -m kgen bench calls matmul --random 10 --rows $3 --seed $2 $4 --fresh-inputs --dtype float64 --json /tmp/o/$tag.json > /tmp/o/$tag.txt 2>&1)
  fi
  echo "$tag rc=$? $(grep -i 'geomean\|geometric' /tmp/o/$tag.txt | tail -1)" >> /tmp/o/summary.txt
}
for s in "107201 17-256" "107203 9-64"; do set -- $s; for w in "" --weights; do run after $1 $2 $w; run before $1 $2 $w; done; done
cp /tmp/o/summary.txt $OUT/; tar -czf $OUT/o.tgz -C /tmp/o .
