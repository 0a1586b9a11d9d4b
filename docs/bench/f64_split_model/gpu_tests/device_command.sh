. .run3/prefix.sh >/dev/null 2>&1
mkdir -p /tmp/kc /tmp/g && tar -xJf .run3/kc16.tar.xz -C /tmp/kc
git log --oneline -1 > /tmp/g/tree.txt 2>/dev/null
KGEN_TC_EXAMPLES=50 timeout 400 python -m pytest -q tests/test_tensorcore_gpu.py -k "float64 or edge_block or fragments_ahead_property or element_copies or l2_fetch" > /tmp/g/gpu_tests.txt 2>&1
echo "gpu tests rc=$? $(tail -1 /tmp/g/gpu_tests.txt)" >> /tmp/g/summary.txt
cp /tmp/g/summary.txt $OUT/; tar -czf $OUT/g.tgz -C /tmp/g .
