. .run3/prefix.sh >/dev/null 2>&1
ROOT=$PWD; FINAL=$OUT; mkdir -p /tmp/kc /tmp/txt
tar -xJf .run3/kc2.tar.xz -C /tmp/kc
OUT=$FINAL TAG=few_fit SHAPES=$(cat .run3/few_fit.txt) VARIANTS="f0:l2_fetch=0;k32:bk=32;k32f256:bk=32,l2_fetch=256" \
  timeout 200 python docs/bench/research/mma_whole_tiles.py > /tmp/txt/few_fit.txt 2>&1
echo "few_fit rc=$?" >> /tmp/txt/summary.txt; tail -4 /tmp/txt/few_fit.txt >> /tmp/txt/summary.txt
bench() {  # tree name, weights flag, rep
  n=pub_$1$2_$3
  if [ $1 = base ]; then cd $ROOT/.run3/base; export PYTHONPATH=/tmp/site:$ROOT/.run3/base; else cd $ROOT; export PYTHONPATH=/tmp/site:$ROOT; fi
  timeout 100 python -m kgen bench calls matmul --random 10 --rows 17-64 --seed 100201 $2 --fresh-inputs --dtype float64 \
     --json /tmp/txt/$n.json > /tmp/txt/$n.txt 2>&1
  echo "$n rc=$? $(grep -o '"geomean_x": [0-9.]*' /tmp/txt/$n.json | tail -1)" >> /tmp/txt/summary.txt
  cd $ROOT
}
for rep in 1 2; do for tree in base new; do bench $tree --weights $rep; done; done
for tree in base new; do bench $tree "" 1; done
cp /tmp/txt/summary.txt $FINAL/; tar -czf $FINAL/txt.tgz -C /tmp/txt .
