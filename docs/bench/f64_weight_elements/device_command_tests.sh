. .run3/prefix.sh >/dev/null 2>&1
mkdir -p /tmp/kc /tmp/g && tar -xJf .run3/kc11.tar.xz -C /tmp/kc
KGEN_TC_EXAMPLES=50 timeout 330 python -m pytest -q tests/test_tensorcore_gpu.py -k "float64 or edge_block or fragments_ahead_property or element_copies or l2_fetch" > /tmp/g/gpu_tests.txt 2>&1
echo "gpu tests rc=$? $(tail -1 /tmp/g/gpu_tests.txt)" >> /tmp/g/summary.txt
timeout 60 python docs/bench/research/sanitize_f64_rules.py > /tmp/g/sanitize_plain.txt 2>&1
echo "sanitize rc=$? $(tail -1 /tmp/g/sanitize_plain.txt)" >> /tmp/g/summary.txt
PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 170 compute-sanitizer --tool memcheck python docs/bench/research/sanitize_f64_rules.py > /tmp/g/sanitize_memcheck.txt 2>&1
echo "memcheck rc=$? $(grep 'bad \|ERROR SUMMARY' /tmp/g/sanitize_memcheck.txt | tr '\n' ' ')" >> /tmp/g/summary.txt
cp /tmp/g/summary.txt $OUT/; tar -czf $OUT/g.tgz -C /tmp/g .
