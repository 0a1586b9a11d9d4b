#!/usr/bin/env bash
# Call 1: Nsight Compute (full set, SASS source counters) on short-K products, main and the branch;
# the staged-epilogue A/B (odd_output_ab.py) main/branch alternating.
set -u
R=/tmp/r; mkdir -p $R /tmp/t/main; ROOT=$PWD
tar -C /tmp/t/main -xf .pc/main.tar
export KGEN_TUNE_DB="$(mktemp -d)/empty.db"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/gpu.txt
step() { local name=$1 limit=$2; shift 2; echo "== $name $(date +%T)" >&2; timeout "$limit" "$@" > "$R/$name.txt" 2>&1; echo "exit $?" >> "$R/$name.txt"; tail -3 "$R/$name.txt" >&2; }
pack() { tar -C $R -czf $OUT/results.tgz .; }
# ncu on main: two cases (staged odd N, register-path even N), kgen + cuBLAS + fill each.
(cd /tmp/t/main && export PYTHONPATH=/tmp/site:/tmp/t/main CASES="bfloat16:5122x5923x28:col bfloat16:2326x2634x26:col" &&
 step ncu_main 150 ncu --clock-control none --profile-from-start off --launch-count 6 --set full --import-source no -o $R/main python $ROOT/docs/bench/research/ncu_short_k.py)
(export CASES="bfloat16:5122x5923x28:col" &&
 step ncu_branch 100 ncu --clock-control none --profile-from-start off -k regex:kgen_tc --launch-count 1 --set full --import-source no -o $R/branch python docs/bench/research/ncu_short_k.py)
for rep in main branch; do
  [ -f $R/$rep.ncu-rep ] || continue
  ncu -i $R/$rep.ncu-rep --page details --print-details all --csv > $R/${rep}_details.csv 2>&1
  ncu -i $R/$rep.ncu-rep --page source --csv --print-source sass > $R/${rep}_sass.csv 2>&1
done
pack
for round in 1 2; do
  for tree in main branch; do
    d=/tmp/t/main; [ $tree = branch ] && d=$ROOT
    (cd $d && export PYTHONPATH=/tmp/site:$d OUT=$R &&
     step ab_${tree}_col_r$round 120 env SEED=140001 COUNT=0 SHORT=10 LAYOUT=col DTYPE=bfloat16 python $ROOT/docs/bench/research/odd_output_ab.py ${tree}_col_r$round &&
     step ab_${tree}_row_r$round 120 env SEED=140002 COUNT=0 SHORT=10 LAYOUT=row DTYPE=float16 python $ROOT/docs/bench/research/odd_output_ab.py ${tree}_row_r$round)
  done
  pack
done
