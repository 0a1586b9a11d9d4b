"""float32 products below 2^30 flops as users call them: where the time of `kgen.matmul`
goes. For each shape: one call between CUDA events and back to back (host time included),
beside cuBLAS SGEMM (TF32 off); the device time of both from a CUDA graph replay (host time
excluded); and the spec dispatch chose. SHAPES=MxNxK,... named shapes plus the products under
2^30 flops among COUNT shapes drawn by `kgen bench calls`' generator (seed SEED).
Output: $OUT/small_products.json."""
import json
import os

import torch

import kgen
from kgen.bench.calls import _time_pair, random_matmul_shapes
from kgen.bench.skinny import time_graph
from kgen.tune.dispatch import call_family, select


def shapes():
    out = [tuple(int(v) for v in s.split("x")) for s in os.environ.get("SHAPES", "").split(",") if s]
    drawn = random_matmul_shapes(int(os.environ.get("COUNT", "0")), int(os.environ.get("SEED", "1")))
    out += [s for s in drawn if 2.0 * s[0] * s[1] * s[2] < 2 ** 30]
    return out


def measure(M, N, K):
    A = torch.randn(M, K, device="cuda")
    B = torch.randn(K, N, device="cuda")
    C = kgen.matmul(A, B)
    ref = A.double() @ B.double()
    err = float((C.double() - ref).norm() / ref.norm())
    t = _time_pair(lambda: kgen.matmul(A, B), lambda: torch.matmul(A, B))
    C2 = torch.empty_like(C)
    dev_k = time_graph(torch, [lambda: kgen.matmul(A, B, out=C)], 50)   # kgen's call captured in a graph
    dev_c = time_graph(torch, [lambda: torch.matmul(A, B, out=C2)], 50)
    fam = call_family(A, B, "float32")
    choice = select(fam, {"M": M, "N": N, "K": K}, "float32")
    row = {"shape": [M, N, K], "err": err, "kgen_us": t["kgen_single"] * 1e3, "cublas_us": t["peer_single"] * 1e3,
           "kgen_pipe_us": t["kgen_pipe"] * 1e3, "cublas_pipe_us": t["peer_pipe"] * 1e3,
           "kgen_dev_us": dev_k, "cublas_dev_us": dev_c, "family": fam.kernel, "origin": choice.origin,
           "spec": choice.spec.to_json()}
    print(f"{M}x{N}x{K}: one {row['kgen_us']:.1f}/{row['cublas_us']:.1f} us "
          f"({row['cublas_us'] / row['kgen_us']:.2f}x), "
          f"pipe {row['kgen_pipe_us']:.1f}/{row['cublas_pipe_us']:.1f}, "
          f"device {dev_k:.1f}/{dev_c:.1f} us, err {err:.1e}, {fam.kernel} {choice.origin} {row['spec']}",
          flush=True)
    return row


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    rows = [measure(*s) for s in shapes()]
    with open(os.path.join(os.environ.get("OUT", "."), "small_products.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
