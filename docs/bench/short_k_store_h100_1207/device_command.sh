# NVIDIA H100 80GB HBM3, from the repository root with the vector store applied (vector_store.patch
# on main at cfe68a6); .pc/ held trees.tar.xz (base: main's kgen/ and templates/; even: the patch
# plus the condition below), kc.tar.xz (cubins compiled on the host for the three trees), vec.sh,
# short.txt and mid.txt (copies here).
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p /tmp/kc && tar -C /tmp/kc -xJf .pc/kc.tar.xz; export KGEN_CACHE_DIR=/tmp/kc KGEN_TEST_SHARED_CACHE=1
bash .pc/vec.sh
# The profile, an earlier call on the same kind of machine (main at cfe68a6):
# CASES="bfloat16:5122x5923x28:col float16:2411x4849x36:row bfloat16:948x1217x21:col float16:3316x2664x20:row" \
#   ncu --clock-control none --profile-from-start off --section SpeedOfLight --section MemoryWorkloadAnalysis \
#   --section WarpStateStats --section Occupancy --section LaunchStats python docs/bench/research/ncu_short_k.py
