# Float64 few-row products as users call them (host time included), merged main (9-256 rows on the tensor cores
# whatever the multiply-adds), fresh draws: seed 99801 at 17-256 rows, 99802 at 65-256, both weight orders.
. .run3/prefix.sh >/dev/null 2>&1
FINAL=$OUT; mkdir -p /tmp/kc /tmp/txt
tar -xJf .run3/kc8.tar.xz -C /tmp/kc
for run in "99801 17-256" "99802 65-256"; do set -- $run
  for w in "" "--weights"; do
    n=pub_$1${w#--}
    timeout 120 python -m kgen bench calls matmul --random 10 --rows $2 --seed $1 $w \
       --fresh-inputs --dtype float64 --json $FINAL/$n.json > /tmp/txt/$n.txt 2>&1
    echo "$n rc=$? $(grep -o '"geomean_x": [0-9.]*' $FINAL/$n.json | tail -1)" >> /tmp/txt/summary.txt
  done
done
cp /tmp/txt/summary.txt $FINAL/; tar -czf $FINAL/txt.tgz -C /tmp/txt .
