#!/usr/bin/env bash
# Call 2: GPU tests of the staged output and short K, memcheck and racecheck of the staged store.
set -u
R=/tmp/r2; mkdir -p $R
export KGEN_TUNE_DB="$(mktemp -d)/empty.db"
step() { local name=$1 limit=$2; shift 2; echo "== $name $(date +%T)" >&2; timeout "$limit" "$@" > "$R/$name.txt" 2>&1; echo "exit $?" >> "$R/$name.txt"; tail -3 "$R/$name.txt" >&2; }
step gpu_tests 240 python -m pytest -q -m gpu tests/test_tensorcore_gpu.py -k "short_k_16bit or unaligned_mid_size or tensor_matmul_property or element_copies_property or adds_the_k_slices"
tar -C $R -czf $OUT/results.tgz .
for mode in SHORT_K ELEMENT PLAIN; do
  step memcheck_$mode 120 env $mode=1 compute-sanitizer --tool memcheck --error-exitcode 9 python docs/bench/research/sanitize_staged_output.py
done
step racecheck_SHORT_K 150 env SHORT_K=1 compute-sanitizer --tool racecheck --error-exitcode 9 python docs/bench/research/sanitize_staged_output.py
tar -C $R -czf $OUT/results.tgz .
