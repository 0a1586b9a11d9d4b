set -x
. .run3/prefix.sh
ROOT=$PWD
R=/tmp/res; mkdir -p $R
mkdir -p /tmp/kc && tar -xJf .run3/kc67.tar.xz -C /tmp/kc
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $R/gpu.txt
for f in mma_fit mma_check; do
  mkdir -p $R/$f
  (cd docs/bench/research && SHAPES=$(cat $ROOT/.run3/$f.txt) ONLY=wgsplit OUT=$R/$f timeout 120 python3 short_k_split.py > $R/$f/log.txt 2>&1)
  tail -3 $R/$f/log.txt
  tar -czf $OUT/results.tgz -C $R .
done
