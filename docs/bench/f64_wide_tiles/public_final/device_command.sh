. .run3/prefix.sh >/dev/null 2>&1
FINAL=$OUT; mkdir -p /tmp/kc /tmp/txt
tar -xJf .run3/kc5.tar.xz -C /tmp/kc
for seed in 100701 100702; do for w in "" --weights; do n=final_$seed$w
  timeout 70 python -m kgen bench calls matmul --random 12 --rows 17-256 --seed $seed $w --fresh-inputs --dtype float64 --json /tmp/txt/$n.json > /tmp/txt/$n.txt 2>&1
  echo "$n rc=$? $(grep -o '"geomean_x": [0-9.]*' /tmp/txt/$n.json | tail -1) $(grep -o '"min_x": [0-9.]*' /tmp/txt/$n.json | tail -1)" >> /tmp/txt/summary.txt
done; done
cp /tmp/txt/summary.txt $FINAL/; tar -czf $FINAL/txt.tgz -C /tmp/txt .
