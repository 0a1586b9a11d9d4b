. .run3/prefix.sh >/dev/null 2>&1
ROOT=$PWD; FINAL=$OUT; mkdir -p /tmp/kc /tmp/txt
tar -xJf .run3/kc6.tar.xz -C /tmp/kc
OUT=$FINAL TAG=wide_held3 SHAPES=$(cat .run3/wide_held3.txt) VARIANTS="t64:tile=64/64/16,warp_tile=32/32,mma_shape=m16n8k16,min_blocks=3,resplit=1;n128:tile=64/128/16,warp_tile=32/64,mma_shape=m16n8k8,min_blocks=2,resplit=1" \
  timeout 240 python docs/bench/research/mma_whole_tiles.py > /tmp/txt/wide_held3.txt 2>&1
echo "wide_held3 rc=$?" >> /tmp/txt/summary.txt; tail -6 /tmp/txt/wide_held3.txt >> /tmp/txt/summary.txt
timeout 200 python -m pytest -q tests/test_tensorcore_gpu.py -k "float64 or l2_fetch" > /tmp/txt/gpu_tests.txt 2>&1
echo "gpu tests rc=$? $(tail -1 /tmp/txt/gpu_tests.txt)" >> /tmp/txt/summary.txt
timeout 100 python docs/bench/research/sanitize_f64_rules.py > /tmp/txt/sanitize_plain.txt 2>&1
echo "sanitize rc=$? $(tail -1 /tmp/txt/sanitize_plain.txt)" >> /tmp/txt/summary.txt
cp /tmp/txt/summary.txt $FINAL/; tar -czf $FINAL/txt.tgz -C /tmp/txt .
