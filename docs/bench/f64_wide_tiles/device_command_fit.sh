. .run3/prefix.sh >/dev/null 2>&1
ROOT=$PWD; FINAL=$OUT; mkdir -p /tmp/kc /tmp/txt
tar -xJf .run3/kc3.tar.xz -C /tmp/kc
OUT=$FINAL TAG=tiles_fit SHAPES=$(cat .run3/tiles_fit.txt) VARIANTS="$(cat .run3/tiles_variants.txt)" \
  timeout 240 python docs/bench/research/mma_whole_tiles.py > /tmp/txt/tiles_fit.txt 2>&1
echo "tiles_fit rc=$?" >> /tmp/txt/summary.txt; tail -6 /tmp/txt/tiles_fit.txt >> /tmp/txt/summary.txt
KGEN_TC_EXAMPLES=100 timeout 300 python -m pytest -q tests/test_tensorcore_gpu.py -k "float64 or few_row or l2_fetch or edge_block or element_copies" > /tmp/txt/gpu_tests.txt 2>&1
echo "gpu tests rc=$? $(tail -1 /tmp/txt/gpu_tests.txt)" >> /tmp/txt/summary.txt
timeout 100 python docs/bench/research/sanitize_f64_rules.py > /tmp/txt/sanitize_plain.txt 2>&1
echo "sanitize rc=$? $(tail -1 /tmp/txt/sanitize_plain.txt)" >> /tmp/txt/summary.txt
PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 150 compute-sanitizer --tool memcheck python docs/bench/research/sanitize_f64_rules.py > /tmp/txt/sanitize_memcheck.txt 2>&1
echo "memcheck rc=$? $(grep -a 'bad\|ERROR SUMMARY' /tmp/txt/sanitize_memcheck.txt | tail -2 | tr '\n' ' ')" >> /tmp/txt/summary.txt
cp /tmp/txt/summary.txt $FINAL/; tar -czf $FINAL/txt.tgz -C /tmp/txt .
