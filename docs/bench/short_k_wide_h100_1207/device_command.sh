. .run3/prefix.sh >/dev/null 2>&1
ROOT=$PWD; mkdir -p /tmp/kc /tmp/o && tar -xJf .run3/kc50.tar.xz -C /tmp/kc
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > /tmp/o/gpu.txt
pack() { cp /tmp/o/summary.txt $OUT/ 2>/dev/null; tar -czf $OUT/o1.tgz -C /tmp/o .; }
(cd docs/bench/research && for s in 110003 110004; do OUT=/tmp/o SEED=$s COUNT=12 KMIN=96 KMAX=768 ONLY=mma64,mma64k16b4,mma64k16b3,mma64k16s4b4 timeout 100 python short_k_split.py > /tmp/o/short_k_split_$s.txt 2>&1; echo rc=$? >> /tmp/o/short_k_split_$s.txt; echo "study $s t=$SECONDS" >> /tmp/o/summary.txt; pack; done)
run() {  # tree tag args...
  tree=$1; tag=$2; shift 2
  if [ $tree = main ]; then P=/tmp/site:$ROOT; D=$ROOT; else P=/tmp/site:$ROOT/.run3/cand; D=$ROOT/.run3/cand; fi
  (cd $D && PYTHONPATH=$P timeout 45 python -m kgen bench calls matmul "$@" --fresh-inputs --dtype float32 --json /tmp/o/${tree}_${tag}_$rep.json > /tmp/o/${tree}_${tag}_$rep.txt 2>&1)
  echo "$tree $tag $rep rc=$? t=$SECONDS" >> /tmp/o/summary.txt
}
for rep in 1 2; do for tree in cand main; do
  [ $SECONDS -gt 420 ] && break
  run $tree skl --shapes $(cat .run3/skl.txt)
  run $tree sklwt --shapes $(cat .run3/skl.txt) --weights
  pack
done; done
cat /tmp/o/summary.txt; tail -8 /tmp/o/short_k_split_*.txt
