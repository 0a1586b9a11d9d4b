. .run/prefix.sh > /dev/null 2>&1
cd docs/bench/research
export CASES="float32:1x16272x7382:row bfloat16:1x15134x14055:row bfloat16:1x11359x6228:row float16:1x12163x4097:row bfloat16:1x15134x14055:col"
timeout 400 ncu --clock-control none --profile-from-start off --csv --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis python ncu_skinny.py > $OUT/ncu_axpy16.csv 2> $OUT/ncu.err
echo rc=$?
python3 - <<'PY'
import csv, os, collections
rows=list(csv.reader(open(os.environ["OUT"]+"/ncu_axpy16.csv")))
hdr=None; out=collections.OrderedDict()
for r in rows:
    if r and r[0]=="ID": hdr=r; continue
    if not hdr or len(r)!=len(hdr): continue
    d=dict(zip(hdr,r)); key=(d["ID"], d["Kernel Name"][:40])
    out.setdefault(key,[]).append((d["Metric Name"], d["Metric Value"], d.get("Metric Unit","")))
want=("Duration","DRAM Throughput","Memory Throughput","Registers Per Thread","Achieved Occupancy","Theoretical Occupancy","Grid Size","Block Size","Block Limit Registers","Block Limit Shared Mem","Waves Per SM","Warp Cycles Per Issued Instruction","Avg. Active Threads Per Warp","L1/TEX Hit Rate","L2 Hit Rate","Mem Busy","Max Bandwidth","Dynamic Shared Memory Per Block")
for k,v in out.items():
    print(k)
    for n,val,u in v:
        if n in want: print("   ",n,val,u)
PY
head -20 $OUT/ncu.err
