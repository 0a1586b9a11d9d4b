# Call 6: float64 products of 65-256 rows under 2^28 multiply-adds: the SIMT tiles kgen.matmul runs against the tensor spec.
. .run3/prefix.sh >/dev/null 2>&1
FINAL=$OUT; mkdir -p /tmp/kc
tar -xJf .run3/kc_s.tar.xz -C /tmp/kc
for s in 97201 97202; do
  OUT=$FINAL SEED=$s timeout 60 python docs/bench/research/f64_small_family.py > $FINAL/small_$s.txt 2>&1
  echo "$s rc=$?" >> $FINAL/summary.txt; tail -2 $FINAL/small_$s.txt >> $FINAL/summary.txt
done
