. .run/prefix.sh > /dev/null 2>&1
ROOT=$PWD
CF="1x4576x14125,1x7873x6871,1x6494x11067,1x7262x16186,1x5029x10397,1x6179x12486"
CB="1x5586x14791,1x5336x13486,1x6295x7069,1x5653x14551,1x8571x13522,1x15175x6284,1x2119x13962"
cd /tmp
for t in base new; do
  if [ $t = base ]; then P=$ROOT/.run/old; else P=$ROOT; fi
  export PYTHONPATH=/tmp/notriton:/tmp/site:$P KGEN_CACHE_DIR=/tmp/kc_$t
  python -c "import kgen, sys; print('$t', kgen.__file__)"
  timeout 80 python -m kgen bench calls matmul --shapes $CF --weights --dtype float16 --json $OUT/shapes_${t}_float16.json > /dev/null 2>&1; echo "shapes $t f16 rc=$?"
  timeout 80 python -m kgen bench calls matmul --shapes $CB --weights --dtype bfloat16 --json $OUT/shapes_${t}_bfloat16.json > /dev/null 2>&1; echo "shapes $t bf16 rc=$?"
  timeout 100 python -m kgen bench calls matmul --random 10 --seed 47401 --rows 1-1 --weights --multiple 1 --dtype bfloat16 --json $OUT/random_${t}_bfloat16.json > /dev/null 2>&1; echo "random $t bf16 rc=$?"
  timeout 100 python -m kgen bench calls matmul --random 10 --seed 47402 --rows 1-1 --weights --multiple 1 --dtype float16 --json $OUT/random_${t}_float16.json > /dev/null 2>&1; echo "random $t f16 rc=$?"
done
python3 - <<'PY'
import json, os, glob
o=os.environ["OUT"]
for kind in ("shapes","random"):
  for dt in ("float16","bfloat16"):
    b=json.load(open(f"{o}/{kind}_base_{dt}.json")); n=json.load(open(f"{o}/{kind}_new_{dt}.json"))
    print(kind, dt, "base", b["summary"]["geomean_x"], b["summary"]["min_x"], "new", n["summary"]["geomean_x"], n["summary"]["min_x"])
    for x,y in zip(b["rows"],n["rows"]):
      print("  %-16s kgen %.1f -> %.1f us, cuBLAS %.1f %.1f, x %.2f -> %.2f" % ("x".join(map(str,x["shape"])), x["kgen_ms"]*1e3, y["kgen_ms"]*1e3, x["cublas_ms"]*1e3, y["cublas_ms"]*1e3, x["speed_x"], y["speed_x"]))
PY
