"""Host precompile for device_command.sh (run from each tree's folder with PYTHONPATH at it): the cubins kgen.matmul runs on a stand-in H100 for the products given, this tree."""
import sys
from kgen.bench.calls import random_matmul_shapes
from kgen.tune import ahead
dev = ahead.stand_in_device("sm_90", "NVIDIA H100 80GB HBM3", 132)
shapes = [tuple(map(int, s.split("x"))) for s in open(sys.argv[1]).read().strip().split(",")]
for seed in sys.argv[2:]:
    shapes += random_matmul_shapes(10, int(seed), (17, 256))
prods = [ahead.Product(M, N, K, "float64", col) for M, N, K in shapes for col in (False, True)]
print(ahead.compile_ahead(prods, device=dev, workers=2, db=False).compiled)
