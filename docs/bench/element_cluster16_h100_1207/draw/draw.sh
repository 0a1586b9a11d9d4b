#!/usr/bin/env bash
# Broad user-path draw (held-out seeds 121001-121007), empty tuning database, beside cuBLAS.
set -u
OUT="${OUT:-.}"
export KGEN_TUNE_DB="$(mktemp -d)/empty.db"
d() { local name=$1; shift; echo "== $name" >&2; timeout 150 python -m kgen bench calls matmul "$@" --json "$OUT/draw_$name.json" > "$OUT/draw_$name.txt" 2>&1; echo "exit $?" >> "$OUT/draw_$name.txt"; tail -4 "$OUT/draw_$name.txt" >&2; }
d A_f32_1-16_wt --random 16 --rows 1-16 --weights --dtype float32 --seed 121001
d B_bf16_1-16_wt --random 16 --rows 1-16 --weights --dtype bfloat16 --seed 121002
d C_f32_17-256_wt --random 16 --rows 17-256 --weights --dtype float32 --seed 121003
d D_f16_17-256_wt --random 16 --rows 17-256 --weights --dtype float16 --seed 121004
d E_f32_general --random 16 --dtype float32 --seed 121005
d F_f64_general --random 12 --dtype float64 --seed 121006
d G_bf16_1-16_columns --random 16 --rows 1-16 --columns --dtype bfloat16 --seed 121007
