#!/usr/bin/env bash
# As it ran on an NVIDIA H100 80GB HBM3: from the root of main (6f5bb58) with pair_copies.patch applied,
# after python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD;
# .pc/main.tar was `git archive HEAD kgen templates pyproject.toml` of main.
# One call: A/B (main, then the pair copies), the GPU test, memcheck.
set -u
R=$OUT/r; mkdir -p $R
export KGEN_TUNE_DB=/tmp/empty.db KGEN_CACHE_DIR=/tmp/kc
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/gpu.txt
mkdir -p /tmp/trees/main && tar -C /tmp/trees/main -xf .pc/main.tar
HERE=$PWD
py() { local tree=$1; shift; if [ $tree = main ]; then (cd /tmp/trees/main && PYTHONPATH=/tmp/site:/tmp/trees/main "$@"); else (PYTHONPATH=/tmp/site:$HERE "$@"); fi; }
ab() { local tree=$1 label=$2; shift 2; py $tree env "$@" OUT=$R timeout 80 python $HERE/docs/bench/research/pair_copies_ab.py $label > $R/$label.log 2>&1; echo "exit $?" >> $R/$label.log; tail -2 $R/$label.log; }
ab main main1 SEED=131001 SHORT=4 MID=4
ab pairs pairs1 SEED=131001 SHORT=4 MID=4
timeout 90 python -m pytest -q -m gpu tests/test_tensorcore_gpu.py -k "pairs" > $R/gpu_tests.txt 2>&1; echo "exit $?" >> $R/gpu_tests.txt; tail -3 $R/gpu_tests.txt
PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 70 compute-sanitizer --tool memcheck python docs/bench/research/sanitize_pair_copies.py > $R/memcheck.txt 2>&1; echo "exit $?" >> $R/memcheck.txt; tail -4 $R/memcheck.txt
cd $OUT && tar czf results.tgz r && rm -rf r
