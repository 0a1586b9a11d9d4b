. .run/prefix.sh
M="1x4608x3584,3x18944x3584,9x3584x18944,40x9216x3072,128x3072x8192,250x16384x3072,2x4672x4544,13x18176x4544,64x4544x18176,1x50257x1600,100x6400x1600,6x2048x2304,31x9216x2304"
b() {
  n=$1; shift
  timeout 200 python -m kgen bench calls "$@" --json $OUT/$n.json > /tmp/$n.txt 2>&1; echo "$n rc=$?"
  (echo "== $n: $*"; cat /tmp/$n.txt) >> $OUT/all.txt
  grep -E "geomean|min_x|Error" /tmp/$n.txt | tail -4
}
b model_f32 matmul --shapes $M --weights --fresh-inputs --dtype float32
b model_bf16 matmul --shapes $M --weights --fresh-inputs --dtype bfloat16
b rand_f32 matmul --random 12 --seed 41001 --dtype float32
b rows_f16 matmul --random 8 --seed 41002 --rows 1-16 --dtype float16
b mid_f32 matmul --random 8 --seed 41003 --rows 17-256 --weights --dtype float32
b cols_bf16 matmul --random 6 --seed 41004 --rows 1-16 --columns --dtype bfloat16
b red_f32 reduce --lengths 1376,62576545,12,50,110909,441733,336,1466885,999,3 --dtype float32
