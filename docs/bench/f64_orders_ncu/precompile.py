"""Host precompile for device_command.sh: the cubins kgen.matmul runs on a stand-in H100 for its four runs."""
from kgen.tune import ahead
dev = ahead.stand_in_device("sm_90", "NVIDIA H100 80GB HBM3", 132)
prods = [ahead.Product(M, N, K, "float64", col) for M, N, K in ((231, 9655, 8386), (166, 13830, 9027)) for col in (False, True)]
print(ahead.compile_ahead(prods, device=dev, workers=2, db=False).compiled)
