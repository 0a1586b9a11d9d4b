. .run3/prefix.sh >/dev/null 2>&1
ROOT=$PWD; mkdir -p /tmp/kc /tmp/pub && tar -xJf .run3/kc16.tar.xz -C /tmp/kc
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > /tmp/pub/gpu.txt
run() {  # tree seed weights
  tag=$1_$2$3
  if [ $1 = after ]; then
    timeout 100 python -m kgen bench calls matmul --random 12 --rows 17-256 --seed $2 $3 --fresh-inputs --dtype float64 --json /tmp/pub/$tag.json > /tmp/pub/$tag.txt 2>&1
  else
    (cd $ROOT/.run3/base && PYTHONPATH=/tmp/site:$ROOT/.run3/base timeout 100 python -m kgen bench calls matmul --random 12 --rows 17-256 --seed $2 $3 --fresh-inputs --dtype float64 --json /tmp/pub/$tag.json > /tmp/pub/$tag.txt 2>&1)
  fi
  echo "$tag rc=$? $(grep -i 'geomean\|geometric' /tmp/pub/$tag.txt | tail -1)" >> /tmp/pub/summary.txt
}
for seed in 105201 104101 100901 100701 100702; do for w in "" --weights; do run after $seed $w; run before $seed $w; done; done
cp /tmp/pub/summary.txt $OUT/; tar -czf $OUT/pub.tgz -C /tmp/pub .
timeout 60 python docs/bench/research/sanitize_f64_rules.py > /tmp/pub/sanitize_plain.txt 2>&1
echo "sanitize rc=$? $(tail -1 /tmp/pub/sanitize_plain.txt)" >> /tmp/pub/summary.txt
PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 170 compute-sanitizer --tool memcheck python docs/bench/research/sanitize_f64_rules.py > /tmp/pub/sanitize_memcheck.txt 2>&1
echo "memcheck rc=$? $(grep 'bad \|ERROR SUMMARY' /tmp/pub/sanitize_memcheck.txt | tr '\n' ' ')" >> /tmp/pub/summary.txt
cp /tmp/pub/summary.txt $OUT/; tar -czf $OUT/pub.tgz -C /tmp/pub .
