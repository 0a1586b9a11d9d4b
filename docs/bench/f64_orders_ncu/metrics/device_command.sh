# Nsight Compute metrics: shared-memory bank conflicts of the fragment loads and L2 sectors/requests, float64 row-major against W.t().
. .run3/prefix.sh >/dev/null 2>&1
FINAL=$OUT; mkdir -p /tmp/kc
tar -xJf .run3/kc7.tar.xz -C /tmp/kc
CASES="231x9655x8386 166x13830x9027" timeout 150 ncu --clock-control none --profile-from-start off -k regex:kgen_tc_matmul \
  --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_requests_srcunit_tex_op_read.sum,dram__bytes_read.sum,gpu__time_duration.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum \
  python docs/bench/research/ncu_f64_orders.py > $FINAL/ncu_metrics.txt 2>&1
echo "ncu rc=$?" >> $FINAL/summary.txt
