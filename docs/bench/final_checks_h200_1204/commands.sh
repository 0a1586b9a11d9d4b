. .run/prefix.sh
KGEN_SKINNY_EXAMPLES=25 timeout 330 python -m pytest -q -m gpu tests/test_skinny_gpu.py -p no:cacheprovider > $OUT/gpu_skinny.txt 2>&1; echo "skinny rc=$?"; tail -2 $OUT/gpu_skinny.txt
timeout 150 python -m pytest -q -m gpu tests/test_graph_capture_gpu.py tests/test_launch_gpu.py tests/test_matmul_shapes_gpu.py -p no:cacheprovider > $OUT/gpu_other.txt 2>&1; echo "other rc=$?"; tail -2 $OUT/gpu_other.txt
(cd /tmp && timeout 100 python -m kgen bench calls matmul --random 10 --seed 45001 --dtype float32 --json $OUT/calls_f32_45001.json > $OUT/calls_f32_45001.txt 2>&1); echo "calls rc=$?"; grep -E "kgen |geomean|min_x" $OUT/calls_f32_45001.txt | head -14
