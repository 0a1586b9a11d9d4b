# Nsight Compute on float64 products whose row-major and W.t() device times differ by 1.2-1.3x.
. .run3/prefix.sh >/dev/null 2>&1
FINAL=$OUT; mkdir -p /tmp/kc
tar -xJf .run3/kc16.tar.xz -C /tmp/kc
CASES="231x9655x8386 166x13830x9027" timeout 200 ncu --clock-control none --profile-from-start off -k regex:kgen_tc_matmul \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats --section Occupancy \
  python docs/bench/research/ncu_f64_orders.py > $FINAL/ncu.txt 2>&1
echo "ncu rc=$?" >> $FINAL/summary.txt
