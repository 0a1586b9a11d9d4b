set -x
. .run3/prefix.sh
mkdir -p /tmp/kc && tar -xJf .run3/kc60.tar.xz -C /tmp/kc
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $OUT/gpu.txt
export CASES="$(cat .run3/ncu_cases.txt)"
timeout 420 ncu --profile-from-start off --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats --section ComputeWorkloadAnalysis python3 docs/bench/research/ncu_calls.py > $OUT/ncu_calls.txt 2> $OUT/ncu_calls.err
echo rc $? >> $OUT/ncu_calls.err
tail -5 $OUT/ncu_calls.err
grep -c "Section: GPU Speed Of Light" $OUT/ncu_calls.txt
