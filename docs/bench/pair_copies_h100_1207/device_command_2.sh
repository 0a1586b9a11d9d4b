#!/usr/bin/env bash
# As it ran on an NVIDIA H100 80GB HBM3: from the root of main (6f5bb58) with pair_copies.patch applied,
# after python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD;
# .pc/main.tar was `git archive HEAD kgen templates pyproject.toml` of main.
set -u
R=$OUT/r; mkdir -p $R
export KGEN_TUNE_DB=/tmp/empty.db KGEN_CACHE_DIR=/tmp/kc
HERE=$PWD
py() { local tree=$1; shift; if [ $tree = main ]; then (cd /tmp/trees/main && PYTHONPATH=/tmp/site:/tmp/trees/main "$@"); else (PYTHONPATH=/tmp/site:$HERE "$@"); fi; }
ab() { local tree=$1 label=$2; shift 2; py $tree env "$@" OUT=$R timeout 60 python $HERE/docs/bench/research/pair_copies_ab.py $label > $R/$label.log 2>&1; echo "exit $?" >> $R/$label.log; tail -1 $R/$label.log; }
ab pairs pairs2 SEED=131001 SHORT=4 MID=4
ab main main2 SEED=131001 SHORT=4 MID=4
PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 60 compute-sanitizer --tool racecheck python docs/bench/research/sanitize_pair_copies.py > $R/racecheck.txt 2>&1; echo "exit $?" >> $R/racecheck.txt; tail -3 $R/racecheck.txt
cd $OUT && tar czf results.tgz r && rm -rf r
