. .run3/prefix.sh >/dev/null 2>&1
FINAL=$OUT; mkdir -p /tmp/kc /tmp/txt
tar -xJf .run3/kc6.tar.xz -C /tmp/kc
PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 200 compute-sanitizer --tool memcheck python docs/bench/research/sanitize_f64_rules.py > /tmp/txt/sanitize_memcheck.txt 2>&1
echo "memcheck rc=$? $(grep -a 'bad\|ERROR SUMMARY' /tmp/txt/sanitize_memcheck.txt | tail -2 | tr '\n' ' ')" >> /tmp/txt/summary.txt
cp /tmp/txt/summary.txt /tmp/txt/sanitize_memcheck.txt $FINAL/
