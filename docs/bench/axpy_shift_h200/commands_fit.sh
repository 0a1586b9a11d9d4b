. .run/prefix.sh > /dev/null 2>&1
ROOT=$PWD
KGEN_SKINNY_EXAMPLES=25 timeout 280 python -m pytest -q -p no:cacheprovider -m gpu tests/test_skinny_gpu.py -k "axpy_shift or random_skinny or entries_on_first_use" > $OUT/tests.txt 2>&1; echo "tests rc=$?"; tail -3 $OUT/tests.txt
cd docs/bench/research
PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 120 compute-sanitizer --tool memcheck python sanitize_axpy_shift.py > $OUT/sanitize.txt 2>&1; echo "sanitize rc=$?"; tail -3 $OUT/sanitize.txt
export CASES="float32:2x15766x11065:row float32:1x1959x10490:row float32:4x4693x12470:row float32:3x8047x6316:row float32:4x11533x11877:row float32:4x8274x10865:row float16:2x7219x5576:row float32:4x2859x2561:row float32:3x3111x12835:row float16:1x3505x3991:row bfloat16:3x2487x5745:row float32:4x1474x10805:row bfloat16:1x11359x6228:row bfloat16:1x15134x14055:row float16:1x12163x4097:row"
for t in base new new3 new3 new base; do
  if [ $t = base ]; then P=$ROOT/.run/old; else P=$ROOT; fi
  if [ $t = new3 ]; then MB=3; else MB=0; fi
  KGEN_SHIFT_MB=$MB PYTHONPATH=/tmp/notriton:/tmp/site:$P KGEN_CACHE_DIR=/tmp/kc_$t timeout 70 python graph_ab.py $t >> $OUT/shift.jsonl 2>>$OUT/shift.err; echo "$t rc=$?"
done
cd $ROOT
python - <<'PY' | tee $OUT/shift.txt
import json, os, collections, math
d=collections.defaultdict(lambda: collections.defaultdict(list))
for l in open(os.environ["OUT"]+"/shift.jsonl"):
    j=json.loads(l); d[j["case"]][j["tree"]].append((j["us"], j["err"]))
g=collections.defaultdict(list)
for c,v in d.items():
    dt=c.split(":")[0]; M,N,K=map(int,c.split(":")[1].split("x")); it=2 if "16" in dt else 4
    bound=(M*K+N*K+M*N)*it/4.2e12*1e6
    b=min(x[0] for x in v["base"]); line=f"{c:30s} bound {bound:6.1f} base {b:7.2f} ({bound/b:.0%})"
    for t in ("new","new3"):
        if v[t]:
            n=min(x[0] for x in v[t]); g[t].append(math.log(b/n)); line+=f" {t} {n:7.2f} ({bound/n:.0%}) x{b/n:.3f}"
    line+=f" err {max(x[1] for x in v['base']):.2e} {max(x[1] for x in v['new']+v['new3']):.2e}"
    print(line)
for t,v in g.items(): print(t, "geomean", round(math.exp(sum(v)/len(v)),4), len(v))
PY
tail -2 $OUT/shift.err
