. .run3/prefix.sh >/dev/null 2>&1
ROOT=$PWD; mkdir -p /tmp/kc /tmp/txt && tar -xJf .run3/kc3.tar.xz -C /tmp/kc
KGEN_TC_EXAMPLES=50 timeout 330 python -m pytest -q tests/test_tensorcore_gpu.py -k "float64 or edge_block or fragments_ahead_property or element_copies or l2_fetch" > /tmp/txt/gpu_tests.txt 2>&1
echo "gpu tests rc=$? $(tail -1 /tmp/txt/gpu_tests.txt)" >> /tmp/txt/summary.txt
timeout 60 python docs/bench/research/sanitize_f64_rules.py > /tmp/txt/sanitize_plain.txt 2>&1
echo "sanitize rc=$? $(tail -1 /tmp/txt/sanitize_plain.txt)" >> /tmp/txt/summary.txt
PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 150 compute-sanitizer --tool memcheck python docs/bench/research/sanitize_f64_rules.py > /tmp/txt/sanitize_memcheck.txt 2>&1
echo "memcheck rc=$? $(grep -a 'bad\|ERROR SUMMARY' /tmp/txt/sanitize_memcheck.txt | tail -2 | tr '\n' ' ')" >> /tmp/txt/summary.txt
cp /tmp/txt/summary.txt $OUT/; tar -czf $OUT/txtC.tgz -C /tmp/txt .
