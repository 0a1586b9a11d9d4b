. .run3/prefix.sh >/dev/null 2>&1
ROOT=$PWD; mkdir -p /tmp/kc /tmp/txt && tar -xJf .run3/kc3.tar.xz -C /tmp/kc
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > /tmp/txt/gpu.txt
TAG=rows_held SHAPES=$(cat .run3/rows_held.txt) VARIANTS="$(cat .run3/rows_variants3.txt)" OUT=$OUT \
  timeout 240 python docs/bench/research/mma_whole_tiles.py > /tmp/txt/rows_held.txt 2>&1
echo "held rc=$?" >> /tmp/txt/summary.txt; tail -4 /tmp/txt/rows_held.txt >> /tmp/txt/summary.txt
timeout 80 python docs/bench/research/sanitize_f64_rules.py > /tmp/txt/sanitize_plain.txt 2>&1
echo "sanitize rc=$? $(tail -1 /tmp/txt/sanitize_plain.txt)" >> /tmp/txt/summary.txt
PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 150 compute-sanitizer --tool memcheck python docs/bench/research/sanitize_f64_rules.py > /tmp/txt/sanitize_memcheck.txt 2>&1
echo "memcheck rc=$? $(grep -a 'bad\|ERROR SUMMARY' /tmp/txt/sanitize_memcheck.txt | tail -2 | tr '\n' ' ')" >> /tmp/txt/summary.txt
cp /tmp/txt/summary.txt $OUT/; tar -czf $OUT/txtA.tgz -C /tmp/txt .
