. .run3/prefix.sh >/dev/null 2>&1
mkdir -p /tmp/kc /tmp/t && tar -xJf .run3/kc20.tar.xz -C /tmp/kc
timeout 40 python docs/bench/research/sanitize_f64_rules.py > /tmp/t/sanitize_plain.txt 2>&1
echo "sanitize rc=$? $(tail -1 /tmp/t/sanitize_plain.txt) clusters $(grep -c '"split_merge":"cluster"' /tmp/t/sanitize_plain.txt)" > $OUT/summary.txt
PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 140 compute-sanitizer --tool memcheck python docs/bench/research/sanitize_f64_rules.py > /tmp/t/sanitize_memcheck.txt 2>&1
echo "memcheck rc=$? $(grep 'bad \|ERROR SUMMARY' /tmp/t/sanitize_memcheck.txt | tr '\n' ' ')" >> $OUT/summary.txt
cp /tmp/t/*.txt $OUT/
