#!/usr/bin/env bash
# Both routes of short-K 16-bit products of an N that is a multiple of 8 against W.t(), at one N:
# the short-K tiles on mma.sync (SHORT_K_WEIGHT_T = True, main) and the wgmma kernel (False), in
# one command on one GPU. Run from the repository root on the device, after
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD &&
# About 3 minutes (ROUNDS=1: one round of the device-time comparison, about 2). Outputs under $OUT.
set -u
R=$OUT; ROOT=$PWD
mkdir -p /tmp/t/wgmma && git archive HEAD kgen templates pyproject.toml 2>/dev/null | tar -C /tmp/t/wgmma -x \
  || (cp -r kgen templates pyproject.toml /tmp/t/wgmma/)
sed -i 's/^SHORT_K_WEIGHT_T = True/SHORT_K_WEIGHT_T = False/' /tmp/t/wgmma/kgen/ops/tensorcore.py
grep -q '^SHORT_K_WEIGHT_T = False' /tmp/t/wgmma/kgen/ops/tensorcore.py || { echo "no switch to turn off"; exit 1; }
ln -sfn $ROOT /tmp/t/mma
export KGEN_TUNE_DB="$(mktemp -d)/empty.db"
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/gpu.txt
step() { local name=$1 limit=$2; shift 2; echo "== $name $(date +%T)" >&2; timeout "$limit" "$@" > "$R/$name.txt" 2>&1; echo "exit $?" >> "$R/$name.txt"; tail -1 "$R/$name.txt" >&2; }
ab() {  # tree label seed dtype
  (cd /tmp/t/$1 && export PYTHONPATH=/tmp/site:/tmp/t/$1 OUT=$R &&
   step ab_$2 90 env SEED=$3 COUNT=0 SHORT=12 LAYOUT=col DTYPE=$4 python $ROOT/docs/bench/research/odd_output_ab.py $2)
}
# Device time: short-K products drawn at run time (odd_output_ab.py), each also at N rounded up to
# a multiple of 8 (the products the switch moves); held-out seeds, twice alternating.
for round in $(seq 1 ${ROUNDS:-2}); do
  for tree in wgmma mma; do ab $tree ${tree}_a_r$round 150001 bfloat16; ab $tree ${tree}_b_r$round 150002 float16; done
done
# As users call them: 12 aligned short-K products drawn here, W.t(), both trees.
SHAPES=$(python3 -c "
import random; r=random.Random(150003); s=[]
for _ in range(12):
    M,N=(int(2**r.uniform(9,13)) for _ in range(2)); K=int(2**r.uniform(4,7)); s.append(f'{M}x{-(-N//8)*8}x{K}')
print(','.join(s))")
echo "$SHAPES" > $R/calls_shapes.txt
for tree in wgmma mma; do
  (cd /tmp/t/$tree && export PYTHONPATH=/tmp/site:/tmp/t/$tree &&
   step calls_${tree}_bf16 90 python -m kgen bench calls matmul --shapes "$SHAPES" --dtype bfloat16 --weights --fresh-inputs --json $R/calls_${tree}_bf16.json &&
   step calls_${tree}_f16 90 python -m kgen bench calls matmul --shapes "$SHAPES" --dtype float16 --weights --fresh-inputs --json $R/calls_${tree}_f16.json)
done
(cd $ROOT && step gpu_tests 200 python -m pytest -q -m gpu tests/test_tensorcore_gpu.py -k "short_k_16bit")
