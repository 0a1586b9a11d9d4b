. .run3/prefix.sh >/dev/null 2>&1
mkdir -p /tmp/kc && tar -xJf .run3/kc5.tar.xz -C /tmp/kc
TAG=l1_held SHAPES=$(cat .run3/l1_held.txt) VARIANTS="$(cat .run3/l1off_variants.txt)" \
  timeout 400 python docs/bench/research/mma_whole_tiles.py > $OUT/l1_held.txt 2>&1
echo "rc=$?" >> $OUT/l1_held.txt
timeout 80 python docs/bench/research/sanitize_f64_rules.py > $OUT/sanitize_plain.txt 2>&1
echo "sanitize rc=$? $(tail -1 $OUT/sanitize_plain.txt)" >> $OUT/l1_held.txt
