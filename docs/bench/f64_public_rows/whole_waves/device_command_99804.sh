# float64 17-256 rows as users call them on this tree (seed 99804, twelve products, both weight orders).
. .run3/prefix.sh >/dev/null 2>&1
FINAL=$OUT; mkdir -p /tmp/kc
tar -xJf .run3/kc14.tar.xz -C /tmp/kc
for w in "" "--weights"; do
  n=pub_99804${w#--}
  timeout 120 python -m kgen bench calls matmul --random 12 --rows 17-256 --seed 99804 $w \
     --fresh-inputs --dtype float64 --json $FINAL/$n.json > $FINAL/$n.txt 2>&1
  echo "$n rc=$? $(grep -o '"geomean_x": [0-9.]*' $FINAL/$n.json | tail -1)" >> $FINAL/summary.txt
done
