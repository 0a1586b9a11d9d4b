. .run3/prefix.sh >/dev/null 2>&1
ROOT=$PWD; mkdir -p /tmp/kc /tmp/o && tar -xJf .run3/kc40.tar.xz -C /tmp/kc
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > /tmp/o/gpu.txt
pack() { cp /tmp/o/summary.txt $OUT/ 2>/dev/null; tar -czf $OUT/o.tgz -C /tmp/o .; }
KGEN_TEST_SHARED_CACHE=1 KGEN_DISPATCH_EXAMPLES=${EX:-40} timeout ${TL:-420} python -m pytest -q -p no:cacheprovider tests/test_dispatch_gpu.py --junitxml=/tmp/o/dispatch_gpu.xml > /tmp/o/dispatch_gpu.txt 2>&1
echo "dispatch tests rc=$? $(tail -1 /tmp/o/dispatch_gpu.txt) t=$SECONDS" >> /tmp/o/summary.txt; pack
