# Run on an NVIDIA H100 80GB HBM3 (driver 580.159.04) from the repository root, twice on one warm
# machine (round1: the first call, of whose files only those in round1/ came back; round2: the
# second). .pc/kc.tar.xz held the cubins compiled on the host (sm_90) for the specs the run loads;
# .pc/draw.sh is draw/draw.sh here.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p /tmp/kc && tar -C /tmp/kc -xJf .pc/kc.tar.xz; export KGEN_CACHE_DIR=/tmp/kc KGEN_TEST_SHARED_CACHE=1
FINAL=$OUT; mkdir -p /tmp/r/check2 /tmp/r/draw
OUT=/tmp/r/check2 bash docs/bench/research/el_cluster16_check.sh
OUT=/tmp/r/draw bash .pc/draw.sh
tar -C /tmp/r -czf $FINAL/results.tgz .
