set -x
. .run3/prefix.sh
mkdir -p /tmp/kc && tar -xJf .run3/kc1.tar.xz -C /tmp/kc
R=/tmp/res1; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv > $R/gpu.txt
git log --oneline -1 > $R/tree.txt
SEED=117001 LAYOUT=row DTYPE=bfloat16 OUT=$R python3 docs/bench/research/el_cluster.py > $R/el_row.txt 2>&1
tar -czf $OUT/results.tgz -C $R .
SEED=117001 LAYOUT=col DTYPE=float16 OUT=$R python3 docs/bench/research/el_cluster.py > $R/el_col.txt 2>&1
tar -czf $OUT/results.tgz -C $R .
