# float64 draws 99801 (17-256 rows) and 99802 (65-256) again as users call them, on the tree with K split past a whole wave.
. .run3/prefix.sh >/dev/null 2>&1
FINAL=$OUT; mkdir -p /tmp/kc
tar -xJf .run3/kc8.tar.xz -C /tmp/kc
for run in "99801 17-256" "99802 65-256"; do set -- $run
  for w in "" "--weights"; do
    n=pub_$1${w#--}
    timeout 100 python -m kgen bench calls matmul --random 10 --rows $2 --seed $1 $w \
       --fresh-inputs --dtype float64 --json $FINAL/$n.json > /dev/null 2>&1
    echo "$n rc=$? $(grep -o '"geomean_x": [0-9.]*' $FINAL/$n.json | tail -1)" >> $FINAL/summary.txt
  done
done
