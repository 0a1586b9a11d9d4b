. .run3/prefix.sh >/dev/null 2>&1
ROOT=$PWD; FINAL=$OUT; mkdir -p /tmp/kc /tmp/txt
tar -xJf .run3/kc4.tar.xz -C /tmp/kc
OUT=$FINAL TAG=wide_held SHAPES=$(cat .run3/wide_held.txt) VARIANTS="t64:tile=64/64/16,warp_tile=32/32,mma_shape=m16n8k16,min_blocks=3,resplit=1;n128:tile=64/128/16,warp_tile=32/64,mma_shape=m16n8k8,min_blocks=2,resplit=1" \
  timeout 240 python docs/bench/research/mma_whole_tiles.py > /tmp/txt/wide_held.txt 2>&1
echo "wide_held rc=$?" >> /tmp/txt/summary.txt; tail -6 /tmp/txt/wide_held.txt >> /tmp/txt/summary.txt
timeout 200 python -m pytest -q tests/test_tensorcore_gpu.py -k "float64 or few_row or l2_fetch" > /tmp/txt/gpu_tests.txt 2>&1
echo "gpu tests rc=$? $(tail -1 /tmp/txt/gpu_tests.txt)" >> /tmp/txt/summary.txt
timeout 100 python docs/bench/research/sanitize_f64_rules.py > /tmp/txt/sanitize_plain.txt 2>&1
echo "sanitize rc=$? $(tail -1 /tmp/txt/sanitize_plain.txt)" >> /tmp/txt/summary.txt
PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 150 compute-sanitizer --tool memcheck python docs/bench/research/sanitize_f64_rules.py > /tmp/txt/sanitize_memcheck.txt 2>&1
echo "memcheck rc=$? $(grep -a 'bad\|ERROR SUMMARY' /tmp/txt/sanitize_memcheck.txt | tail -2 | tr '\n' ' ')" >> /tmp/txt/summary.txt
cp /tmp/txt/summary.txt $FINAL/; tar -czf $FINAL/txt.tgz -C /tmp/txt .
