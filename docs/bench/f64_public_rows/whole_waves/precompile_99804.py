"""Host precompile for device_command_99804.sh: the cubins kgen.matmul runs on a stand-in H100 for seed 99804's float64 draw."""
from kgen.bench.calls import random_matmul_shapes
from kgen.tune import ahead
dev = ahead.stand_in_device("sm_90", "NVIDIA H100 80GB HBM3", 132)
prods = [ahead.Product(M, N, K, "float64", col) for M, N, K in random_matmul_shapes(12, 99804, (17, 256)) for col in (False, True)]
print(ahead.compile_ahead(prods, device=dev, workers=2, db=False).compiled)
