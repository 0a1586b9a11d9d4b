. .run3/prefix.sh >/dev/null 2>&1
[ -d /tmp/kc/cubin ] || (mkdir -p /tmp/kc && tar -xJf .run3/kc48.tar.xz -C /tmp/kc)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
KGEN_TEST_SHARED_CACHE=1 KGEN_TC_EXAMPLES=30 timeout 60 python -m pytest -q -p no:cacheprovider tests/test_split_mma_gpu.py > $OUT/split_mma_gpu.txt 2>&1
echo "split mma rc=$? $(tail -1 $OUT/split_mma_gpu.txt) t=$SECONDS" >> $OUT/summary.txt
KGEN_TEST_SHARED_CACHE=1 KGEN_FAULT_EXAMPLES=20 KGEN_FAULTS_JSON=$OUT/faults.json timeout 90 python -m pytest -q -p no:cacheprovider tests/test_faults_gpu.py -k "tensor_matmul-k_tail or tensor_matmul-skip_last" > $OUT/faults_tc.txt 2>&1
echo "faults tc rc=$? $(tail -1 $OUT/faults_tc.txt) t=$SECONDS" >> $OUT/summary.txt
(cd docs/bench/research && for s in 110001 110002; do SEED=$s COUNT=12 timeout 75 python short_k_split.py > $OUT/short_k_split_$s.txt 2>&1; echo rc=$? >> $OUT/short_k_split_$s.txt; done)
echo "short k t=$SECONDS" >> $OUT/summary.txt
KGEN_TEST_SHARED_CACHE=1 KGEN_TC_EXAMPLES=4 timeout $((330 - SECONDS)) python -m pytest -q -p no:cacheprovider tests/test_tensorcore_gpu.py > $OUT/tensorcore_gpu.txt 2>&1
echo "tensorcore rc=$? $(tail -1 $OUT/tensorcore_gpu.txt) t=$SECONDS" >> $OUT/summary.txt
timeout $((480 - SECONDS)) python scripts/sanitize --no-reduce --dispatch-sample 0 --matmul-sample 0 --skinny-sample 0 --tensor-sample 0 --specs .run3/split_specs.jsonl --log $OUT/sanitize.log > $OUT/sanitize.txt 2>&1
echo "sanitize rc=$? t=$SECONDS" >> $OUT/summary.txt
cat $OUT/summary.txt; tail -3 $OUT/sanitize.txt; tail -14 $OUT/short_k_split_*.txt
