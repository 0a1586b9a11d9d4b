. .run3/prefix.sh >/dev/null 2>&1
ROOT=$PWD; FINAL=$OUT; mkdir -p /tmp/kc /tmp/txt
tar -xJf .run3/kc5.tar.xz -C /tmp/kc
OUT=$FINAL TAG=wide_held2 SHAPES=$(cat .run3/wide_held2.txt) VARIANTS="t64:tile=64/64/16,warp_tile=32/32,mma_shape=m16n8k16,min_blocks=3,resplit=1;n128:tile=64/128/16,warp_tile=32/64,mma_shape=m16n8k8,min_blocks=2,resplit=1" \
  timeout 150 python docs/bench/research/mma_whole_tiles.py > /tmp/txt/wide_held2.txt 2>&1
echo "wide_held2 rc=$?" >> /tmp/txt/summary.txt; tail -4 /tmp/txt/wide_held2.txt >> /tmp/txt/summary.txt
mkdir -p /tmp/txt/public
bench() {  # tree, seed, weights flag
  n=$1_$2$3
  if [ $1 = before ]; then cd $ROOT/.run3/base; export PYTHONPATH=/tmp/site:$ROOT/.run3/base; else cd $ROOT; export PYTHONPATH=/tmp/site:$ROOT; fi
  timeout 100 python -m kgen bench calls matmul --random 12 --rows 17-256 --seed $2 $3 --fresh-inputs --dtype float64 \
     --json /tmp/txt/public/$n.json > /tmp/txt/public/$n.txt 2>&1
  echo "$n rc=$? $(grep -o '"geomean_x": [0-9.]*' /tmp/txt/public/$n.json | tail -1) $(grep -o '"min_x": [0-9.]*' /tmp/txt/public/$n.json | tail -1)" >> /tmp/txt/summary.txt
  cd $ROOT
}
for seed in 100701 100702; do for w in "" --weights; do for tree in before after; do bench $tree $seed $w; done; done; done
cp /tmp/txt/summary.txt $FINAL/; tar -czf $FINAL/txt.tgz -C /tmp/txt .
