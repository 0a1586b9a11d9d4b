. .run3/prefix.sh >/dev/null 2>&1
ROOT=$PWD; mkdir -p /tmp/kc /tmp/o && tar -xJf .run3/kc20.tar.xz -C /tmp/kc
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > /tmp/o/gpu.txt
OUT=/tmp/o timeout 60 python docs/bench/research/f64_cluster_capacity.py > /tmp/o/capacity.txt 2>&1
echo "capacity rc=$?" >> /tmp/o/summary.txt; cp /tmp/o/capacity.txt /tmp/o/f64_cluster_capacity.json $OUT/
export KGEN_CAPACITY_JSON=/tmp/o/f64_cluster_capacity.json
python -c "import kgen.ops.tensorcore as t; print('table', t.F64_CLUSTER_BLOCKS)" >> /tmp/o/summary.txt 2>&1
AFTER=/tmp/site:$ROOT:$ROOT/.run3/site
cd docs/bench/research
for set in "cmx cm_shapes" "held cm_held"; do set -- $set
PYTHONPATH=$AFTER OUT=/tmp/o TAG=$1 SHAPES="$(cat $ROOT/.run3/$2.txt)" VARIANTS="ws:split_merge=workspace;cl:split_merge=cluster" timeout 200 python mma_whole_tiles.py > /tmp/o/$1_log.txt 2>&1
echo "$1 rc=$?" >> /tmp/o/summary.txt; tail -4 /tmp/o/$1_log.txt >> /tmp/o/summary.txt
done
cd $ROOT; cp /tmp/o/summary.txt $OUT/; tar -czf $OUT/o.tgz -C /tmp/o .
run() {  # tree seed rows weights
  tag=$1_$2$4
  if [ $1 = after ]; then
    PYTHONPATH=$AFTER timeout 60 python -m kgen bench calls matmul --random 10 --rows $3 --seed $2 $4 --fresh-inputs --dtype float64 --json /tmp/o/$tag.json > /tmp/o/$tag.txt 2>&1
  else
    (cd $ROOT/.run3/base && PYTHONPATH=/tmp/site:$ROOT/.run3/base timeout 60 python -m kgen bench calls matmul --random 10 --rows $3 --seed $2 $4 --fresh-inputs --dtype float64 --json /tmp/o/$tag.json > /tmp/o/$tag.txt 2>&1)
  fi
  echo "$tag rc=$? $(grep -i 'geomean\|geometric' /tmp/o/$tag.txt | tail -1)" >> /tmp/o/summary.txt
}
for rep in 1; do for s in "107301 17-256" "107303 9-64"; do set -- $s; for w in "" --weights; do run after $1 $2 $w; run before $1 $2 $w; done; done; mkdir -p /tmp/o/rep$rep; mv /tmp/o/after_* /tmp/o/before_* /tmp/o/rep$rep/; done
cp /tmp/o/summary.txt $OUT/; tar -czf $OUT/o.tgz -C /tmp/o .
PYTHONPATH=$AFTER KGEN_TC_EXAMPLES=20 timeout 250 python -m pytest -q -p no:cacheprovider tests/test_tensorcore_gpu.py -k "cluster or float64 or element_copies" > /tmp/o/gpu_tests.txt 2>&1
echo "tests rc=$? $(tail -1 /tmp/o/gpu_tests.txt)" >> /tmp/o/summary.txt
cp /tmp/o/summary.txt $OUT/; tar -czf $OUT/o.tgz -C /tmp/o .
