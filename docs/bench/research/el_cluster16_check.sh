#!/usr/bin/env bash
# The device check of the 16-block cluster merge for the 16-bit element tiles past
# ELEMENT_CLUSTER_MAX_K, in one command on an H100 (results under $OUT, a file a step):
#   1. the GPU tests of the element tiles' cluster merge (11-16 slices among them) and their neighbours;
#   2. el_cluster.py on seed 117004 (K past 2560): the dispatched 16-slice cluster against the
#      workspace split and 8/12/16-slice clusters, device time and one call (host time included);
#   3. compute-sanitizer memcheck of sanitize_staged_output.py ELEMENT=1 (29x41x7833 in 16 slices);
#   4. held out: el_cluster.py seeds 117005 (K past 2560) and 117003 (K from 64: the K 128-2560
#      cluster rule too), dispatched against the workspace split, no other splits;
#   5. racecheck of the same sanitizer script;
#   6. kgen bench calls on drawn 16-bit products (empty tuning database), beside cuBLAS.
# Run from the repository root with pycuda importable:  bash docs/bench/research/el_cluster16_check.sh
set -u
OUT="${OUT:-.}"
R=docs/bench/research
export KGEN_TUNE_DB="$(mktemp -d)/empty.db"
step() { local name=$1 limit=$2; shift 2; echo "== $name" >&2
         timeout "$limit" "$@" > "$OUT/$name.txt" 2>&1; echo "exit $?" >> "$OUT/$name.txt"; tail -3 "$OUT/$name.txt" >&2; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/device.txt"
step gpu_tests 300 python -m pytest -q -m gpu tests/test_tensorcore_gpu.py \
     -k "adds_the_k_slices_of_16bit or short_k_16bit or unaligned_mid_size"
step probe_117004_row 150 env SEED=117004 COUNT=10 KMIN=2561 SPLITS=8,12,16 LAYOUT=row DTYPE=bfloat16 python $R/el_cluster.py
step probe_117004_col 150 env SEED=117004 COUNT=10 KMIN=2561 SPLITS=8,12,16 LAYOUT=col DTYPE=float16 python $R/el_cluster.py
step memcheck 200 env ELEMENT=1 compute-sanitizer --tool memcheck --error-exitcode 9 python $R/sanitize_staged_output.py
step held_117005_row 120 env SEED=117005 COUNT=14 KMIN=2561 SPLITS= LAYOUT=row DTYPE=float16 python $R/el_cluster.py
step held_117005_col 120 env SEED=117005 COUNT=14 KMIN=2561 SPLITS= LAYOUT=col DTYPE=bfloat16 python $R/el_cluster.py
step held_117003_row 150 env SEED=117003 COUNT=24 KMIN=64 SPLITS= LAYOUT=row DTYPE=bfloat16 python $R/el_cluster.py
step held_117003_col 150 env SEED=117003 COUNT=24 KMIN=64 SPLITS= LAYOUT=col DTYPE=float16 python $R/el_cluster.py
step racecheck 300 env ELEMENT=1 compute-sanitizer --tool racecheck --error-exitcode 9 python $R/sanitize_staged_output.py
step calls_bf16_weights 120 python -m kgen bench calls matmul --random 24 --seed 120001 --dtype bfloat16 --weights --json "$OUT/calls_bf16_weights.json"
step calls_f16_row 120 python -m kgen bench calls matmul --random 24 --seed 120002 --dtype float16 --json "$OUT/calls_f16_row.json"
mv "$OUT"/el_cluster_*.json "$OUT"/ 2>/dev/null || true
