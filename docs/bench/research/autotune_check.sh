#!/usr/bin/env bash
# The autotuner's acceptance run, as quoted in docs/autotune.md: exhaustive and guided
# tunes of 4096^3 and 3000x5000x700 (guided runs on their own databases, so they cannot
# resume from the exhaustive records, but share the cubin cache), then a repeated tune
# answered from the database. Usage: docs/bench/research/autotune_check.sh OUT_DIR
set -u
out=${1:?usage: autotune_check.sh OUT_DIR}
mkdir -p "$out"
export KGEN_TUNE_DB=${KGEN_TUNE_DB:-/tmp/kgen-check-main.sqlite3}
TIMEFORMAT='%R s wall'
tune() {  # tune NAME ARGS...: one logged, timed `kgen tune matmul` run
    local name=$1; shift
    echo "== kgen tune matmul $*" | tee "$out/$name.log"
    { time python3 -m kgen tune matmul "$@" --quiet --json "$out/$name.json"; } >> "$out/$name.log" 2>&1
    tail -n 25 "$out/$name.log"
}
tune t4096_exhaustive --shape 4096x4096x4096 --strategy exhaustive --compare
for seed in 1 2 3; do
    tune t4096_guided_$seed --shape 4096x4096x4096 --strategy guided --seed $seed --db /tmp/kgen-g4096-$seed.sqlite3
done
tune t3000_exhaustive --shape 3000x5000x700 --strategy exhaustive --compare
for seed in 1 2 3; do
    tune t3000_guided_$seed --shape 3000x5000x700 --strategy guided --seed $seed --db /tmp/kgen-g3000-$seed.sqlite3
done
# The same problem again: answered from the database.
for i in 1 2; do
    echo "== repeat $i" | tee -a "$out/db_hit.log"
    { time python3 -m kgen tune matmul --shape 4096x4096x4096 --strategy exhaustive --quiet; } >> "$out/db_hit.log" 2>&1
done
tail -n 40 "$out/db_hit.log"
# One file to bring back: every log and JSON record of this run.
tar czf "$out.tgz" -C "$(dirname "$out")" "$(basename "$out")"
