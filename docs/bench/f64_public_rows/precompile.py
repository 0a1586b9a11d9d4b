"""Compile on the host the cubins kgen.matmul would launch on an H100 for the float64 few-row draws of device_command.sh (run from the repository root)."""
import kgen
from kgen.bench.calls import random_matmul_shapes
from kgen.tune import ahead
dev = ahead.stand_in_device("sm_90", "NVIDIA H100 80GB HBM3", 132)
prods = []
for seed, rows in ((99801, (17, 256)), (99802, (65, 256))):
    for M, N, K in random_matmul_shapes(10, seed, rows):
        print(seed, f"{M}x{N}x{K}")
        for col in (False, True):
            prods.append(ahead.Product(M, N, K, "float64", col))
print(ahead.compile_ahead(prods, device=dev, workers=2, db=False).compiled)
