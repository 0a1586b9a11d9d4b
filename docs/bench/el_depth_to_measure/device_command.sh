#!/usr/bin/env bash
# Deeper rings for the 16-bit element tiles of a split long K (ELEMENT_SPLIT_STAGES in
# kgen/ops/tensorcore.py): device time of 2, 3 and 4 stages (and twice the slices) on two draws,
# then the tree as it is (2) against a copy with 4, as users call them, on a held-out draw. Run
# from the repository root on the device, after
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD &&
# About 4 minutes. Outputs under $OUT.
set -u
R=$OUT; ROOT=$PWD
mkdir -p /tmp/t/s4 && cp -r kgen templates pyproject.toml /tmp/t/s4/
sed -i 's/^ELEMENT_SPLIT_STAGES = 2$/ELEMENT_SPLIT_STAGES = 4/' /tmp/t/s4/kgen/ops/tensorcore.py
grep -q '^ELEMENT_SPLIT_STAGES = 4$' /tmp/t/s4/kgen/ops/tensorcore.py || { echo "no ELEMENT_SPLIT_STAGES = 2 to change"; exit 1; }
ln -sfn $ROOT /tmp/t/s2
export KGEN_TUNE_DB="$(mktemp -d)/empty.db"
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/gpu.txt
step() { local name=$1 limit=$2; shift 2; echo "== $name $(date +%T)" >&2; timeout "$limit" "$@" > "$R/$name.txt" 2>&1; echo "exit $?" >> "$R/$name.txt"; tail -1 "$R/$name.txt" >&2; }
# Device time, each result checked against float64 on a NaN-poisoned output first.
step el_depth_9801 150 env SEED=9801 COUNT=10 python docs/bench/research/el_depth.py
step el_depth_9802 150 env SEED=9802 COUNT=10 DTYPE=float16 python docs/bench/research/el_depth.py
# As users call them: the products el_depth.py keeps from a held-out draw, both trees, twice alternating.
SHAPES=$(cd $ROOT && SEED=9803 COUNT=12 python3 -c "
import sys; sys.path.insert(0, 'docs/bench/research'); import el_depth
print(','.join(f'{M}x{N}x{K}' for M, N, K in el_depth.shapes()))")
echo "$SHAPES" > $R/calls_shapes.txt
for round in 1 2; do
  for tree in s2 s4; do
    (cd /tmp/t/$tree && export PYTHONPATH=/tmp/site:/tmp/t/$tree &&
     step calls_${tree}_bf16_r$round 90 python -m kgen bench calls matmul --shapes "$SHAPES" --dtype bfloat16 --fresh-inputs --json $R/calls_${tree}_bf16_r$round.json &&
     step calls_${tree}_f16w_r$round 90 python -m kgen bench calls matmul --shapes "$SHAPES" --dtype float16 --weights --fresh-inputs --json $R/calls_${tree}_f16w_r$round.json)
  done
done
