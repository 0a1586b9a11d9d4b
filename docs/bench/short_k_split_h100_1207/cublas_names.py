import sys, torch
torch.backends.cuda.matmul.allow_tf32 = False
shapes = [tuple(int(v) for v in s.split("x")) for s in sys.argv[1].split(",")]
from torch.profiler import profile, ProfilerActivity
for M, N, K in shapes:
    A = torch.randn(M, K, device="cuda"); B = torch.randn(K, N, device="cuda")
    for _ in range(3): torch.mm(A, B)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(5): torch.mm(A, B)
        torch.cuda.synchronize()
    for e in p.key_averages():
        if e.device_type.name == "CUDA" or True:
            t = getattr(e, "device_time", None) or getattr(e, "cuda_time", 0)
            if t: print(f"{M}x{N}x{K}", e.key[:160], f"{t:.1f}us", e.count)
