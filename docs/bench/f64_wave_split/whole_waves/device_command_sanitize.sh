# The float64 rules on the GPU: sanitize_f64_rules.py plainly and under memcheck (edge products of every rule,
# the rows_f64 and whole-wave splits among them), then the matmul-shape GPU tests.
. .run3/prefix.sh >/dev/null 2>&1
FINAL=$OUT; R=/tmp/res; mkdir -p /tmp/kc $R
tar -xJf .run3/kc12.tar.xz -C /tmp/kc
timeout 120 python docs/bench/research/sanitize_f64_rules.py > $R/plain.txt 2>&1; echo "plain rc=$? $(tail -1 $R/plain.txt)" >> $FINAL/summary.txt
PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 200 compute-sanitizer --tool memcheck python docs/bench/research/sanitize_f64_rules.py > $R/memcheck.txt 2>&1
echo "memcheck rc=$? $(grep 'bad ' $R/memcheck.txt | tail -1) $(grep 'ERROR SUMMARY' $R/memcheck.txt | tail -1)" >> $FINAL/summary.txt
timeout 120 python -m pytest -q tests/test_matmul_shapes_gpu.py > $R/tc.txt 2>&1; echo "tc rc=$? $(tail -1 $R/tc.txt)" >> $FINAL/summary.txt
tar -czf $FINAL/res.tgz -C $R .
