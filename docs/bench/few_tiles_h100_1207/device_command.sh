. .run3/prefix.sh >/dev/null 2>&1
ROOT=$PWD; mkdir -p /tmp/kc /tmp/o && tar -xJf .run3/kc52.tar.xz -C /tmp/kc
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > /tmp/o/gpu.txt
pack() { cp /tmp/o/summary.txt $OUT/ 2>/dev/null; tar -czf $OUT/o3.tgz -C /tmp/o .; }
V=mma64,mma64x32b4,mma64x32b6,mma64x32w4,mma32x64b4
study() { (cd docs/bench/research && OUT=/tmp/o SEED=$1 COUNT=14 KMIN=97 KMAX=512 MNMIN=200 MNMAX=2500 TILES_BELOW=396 ONLY=$V timeout 100 python short_k_split.py > /tmp/o/short_k_split_$1.txt 2>&1; echo rc=$? >> /tmp/o/short_k_split_$1.txt); echo "study $1 t=$SECONDS" >> /tmp/o/summary.txt; pack; }
study 113101
BEST=$(python -c "
import json, math
rows = json.load(open('/tmp/o/short_k_split_113101.json'))['rows']
forms = ['mma64x32b4', 'mma64x32b6', 'mma64x32w4', 'mma32x64b4']
gm = lambda n: math.exp(sum(math.log(r['cublas_us'] / r[n + '_us']) for r in rows) / len(rows))
print(max(forms, key=gm))")
echo "fit picks $BEST" >> /tmp/o/summary.txt
study 113102
run() {  # tree tag args...
  tree=$1; tag=$2; shift 2
  if [ $tree = main ]; then P=/tmp/site:$ROOT; D=$ROOT; else P=/tmp/site:$ROOT/.run3/cand2; D=$ROOT/.run3/cand2; fi
  (cd $D && KGEN_CAND_FEW=$BEST PYTHONPATH=$P timeout 45 python -m kgen bench calls matmul "$@" --fresh-inputs --dtype float32 --json /tmp/o/${tree}_${tag}_$rep.json > /tmp/o/${tree}_${tag}_$rep.txt 2>&1)
  echo "$tree $tag $rep rc=$? t=$SECONDS" >> /tmp/o/summary.txt
}
for rep in 1 2; do for tree in cand main; do
  [ $SECONDS -gt 260 ] && break
  run $tree skf --shapes $(cat .run3/skf.txt)
  run $tree skfwt --shapes $(cat .run3/skf.txt) --weights
  pack
done; done
cat /tmp/o/summary.txt; for f in /tmp/o/short_k_split_*.txt; do tail -7 $f; done
