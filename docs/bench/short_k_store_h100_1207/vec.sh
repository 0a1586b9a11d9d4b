#!/usr/bin/env bash
# Vector stores of the staged 16-bit output: GPU tests and sanitizers on the working tree, then
# kgen bench calls on short-K and odd-N mid-size products for base (main), new (odd N through the
# vector store) and even (every beta = 0 16-bit output of a staged spec through it), two rounds.
set -u
R=/tmp/r; mkdir -p $R /tmp/t; ROOT=$PWD; P=$ROOT/.pc
tar -C /tmp/t -xJf $P/trees.tar.xz; ln -s $ROOT /tmp/t/new
export KGEN_TUNE_DB="$(mktemp -d)/empty.db"
step() { local name=$1 limit=$2; shift 2; echo "== $name" >&2; timeout "$limit" "$@" > "$R/$name.txt" 2>&1; echo "exit $?" >> "$R/$name.txt"; tail -2 "$R/$name.txt" >&2; }
step gpu_tests 200 python -m pytest -q -m gpu tests/test_tensorcore_gpu.py -k "short_k_16bit or unaligned_mid_size or adds_the_k_slices_of_16bit or tensor_matmul_property or element_copies_property"
step memcheck_short 90 env SHORT_K=1 compute-sanitizer --tool memcheck --error-exitcode 9 python docs/bench/research/sanitize_staged_output.py
step memcheck_element 90 env ELEMENT=1 compute-sanitizer --tool memcheck --error-exitcode 9 python docs/bench/research/sanitize_staged_output.py
step racecheck_short 120 env SHORT_K=1 compute-sanitizer --tool racecheck --error-exitcode 9 python docs/bench/research/sanitize_staged_output.py
tar -C $R -czf $OUT/results.tgz .
for round in 1 2; do
  for tree in base new even; do
    for set in short mid; do
      [ $tree = even ] && [ $set = mid ] && continue
      (cd /tmp/t/$tree && export PYTHONPATH=/tmp/site:/tmp/t/$tree &&
       step ${tree}_${set}_bf16wt_r$round 60 python -m kgen bench calls matmul --shapes "$(cat $P/$set.txt)" --dtype bfloat16 --weights --json $R/${tree}_${set}_bf16wt_r$round.json &&
       step ${tree}_${set}_f16row_r$round 60 python -m kgen bench calls matmul --shapes "$(cat $P/$set.txt)" --dtype float16 --json $R/${tree}_${set}_f16row_r$round.json)
    done
  done
  tar -C $R -czf $OUT/results.tgz .
done
