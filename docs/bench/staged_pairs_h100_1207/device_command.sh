#!/usr/bin/env bash
# Run on one H100 from the repository root with the change applied (it was staged_pairs.patch then)
# after
#   mkdir -p .pc && git stash -q && git archive HEAD kgen templates pyproject.toml > .pc/main.tar && git stash pop -q
# on the host (main without the patch) and, on the device,
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD &&
# Device-time A/B of main and the patch (odd_output_ab.py: short-K products, each also with N
# rounded up to a multiple of 8, which the patch moves to the staged store), the sanitizers and
# the short-K GPU test on the patch, held-out draws, then public calls. About 7 minutes.
set -u
R=/tmp/r3; mkdir -p $R /tmp/t/main; ROOT=$PWD
tar -C /tmp/t/main -xf .pc/main.tar; ln -sfn $ROOT /tmp/t/patch
export KGEN_TUNE_DB="$(mktemp -d)/empty.db"
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/gpu.txt
step() { local name=$1 limit=$2; shift 2; echo "== $name $(date +%T)" >&2; timeout "$limit" "$@" > "$R/$name.txt" 2>&1; echo "exit $?" >> "$R/$name.txt"; tail -2 "$R/$name.txt" >&2; }
pack() { tar -C $R -czf $OUT/results.tgz .; }
ab() {  # tree label seed layout dtype
  (cd /tmp/t/$1 && export PYTHONPATH=/tmp/site:/tmp/t/$1 OUT=$R &&
   step ab_$2 90 env SEED=$3 COUNT=0 SHORT=10 LAYOUT=$4 DTYPE=$5 python $ROOT/docs/bench/research/odd_output_ab.py $2)
}
for round in 1 2; do
  for tree in main patch; do ab $tree ${tree}_col_r$round 140001 col bfloat16; ab $tree ${tree}_row_r$round 140002 row float16; done
  pack
done
step memcheck_SHORT_K 90 env SHORT_K=1 compute-sanitizer --tool memcheck --error-exitcode 9 python docs/bench/research/sanitize_staged_output.py
step memcheck_PLAIN 90 env PLAIN=1 compute-sanitizer --tool memcheck --error-exitcode 9 python docs/bench/research/sanitize_staged_output.py
step racecheck_SHORT_K 120 env SHORT_K=1 compute-sanitizer --tool racecheck --error-exitcode 9 python docs/bench/research/sanitize_staged_output.py
pack
step gpu_tests 200 python -m pytest -q -m gpu tests/test_tensorcore_gpu.py -k "short_k_16bit or unaligned_mid_size or tensor_matmul_property"
pack
for tree in patch main; do ab $tree ${tree}_hcol 140003 col float16; ab $tree ${tree}_hrow 140004 row bfloat16; done
pack
# Public calls (host time included): 12 short-K products drawn here (seed 140005), M, N 512-8192,
# K 16-128, N as drawn (odd or even).
SHAPES=$(python3 -c "
import random; r=random.Random(140005); s=[]
for _ in range(12):
    M,N=(int(2**r.uniform(9,13)) for _ in range(2)); K=int(2**r.uniform(4,7)); s.append(f'{M}x{N}x{K}')
print(','.join(s))")
echo "$SHAPES" > $R/calls_shapes.txt
for tree in main patch; do
  (cd /tmp/t/$tree && export PYTHONPATH=/tmp/site:/tmp/t/$tree &&
   step calls_${tree}_bf16wt 60 python -m kgen bench calls matmul --shapes "$SHAPES" --dtype bfloat16 --weights --fresh-inputs --json $R/calls_${tree}_bf16wt.json)
  pack
done
