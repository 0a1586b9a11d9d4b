. .run3/prefix.sh
mkdir -p /tmp/kc && tar -xJf .run3/kc2.tar.xz -C /tmp/kc
R=/tmp/res2; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv > $R/gpu.txt
ROOT=$PWD
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_tensorcore_gpu.py -k "adds_the_k_slices_of_16bit or unaligned_mid_size or short_k_16bit" > $R/gpu_tests.txt 2>&1
tar -czf $OUT/results.tgz -C $R .
for round in 1 2; do
  for t in base cand; do
    cd $ROOT/.run3/$t
    PYTHONPATH=/tmp/site:$PWD python3 -m kgen bench calls matmul --shapes $(cat $ROOT/.run3/rows.txt) --fresh-inputs --dtype bfloat16 --json $R/${t}_row_r$round.json > $R/${t}_row_r$round.txt 2>&1
    PYTHONPATH=/tmp/site:$PWD python3 -m kgen bench calls matmul --shapes $(cat $ROOT/.run3/cols.txt) --fresh-inputs --weights --dtype float16 --json $R/${t}_col_r$round.json > $R/${t}_col_r$round.txt 2>&1
    tar -czf $OUT/results.tgz -C $R .
  done
  cd $ROOT
  if [ $round = 1 ]; then
    for tool in memcheck racecheck; do
      ELEMENT=1 timeout 100 compute-sanitizer --tool $tool python3 docs/bench/research/sanitize_staged_output.py > $R/sanitize_$tool.txt 2>&1
    done
    tar -czf $OUT/results.tgz -C $R .
  fi
done
