"""Which skinny form to run where the large operand's rows allow only loads of 4 bytes or fewer
(an odd K of a weight stored N x K, an odd N of one stored K x N): the tensor-core forms the shape
would get, or the SIMT forms. For each dtype, storage order of the weight, weight size and row
count: device time of bound launches of both specs over rotated copies of the weight (median of
7 batches), each result first checked against float64 on a NaN-poisoned output, with the bound
(bytes over the copy bandwidth of the same run) and cuBLAS beside.

    python skinny_unaligned_forms.py            # output: $OUT/skinny_unaligned_forms.json
    WEIGHTS=4096x4097,2816x7169 F32_ROWS=6,8,12,16 B16_ROWS=2,4,8,16 python skinny_unaligned_forms.py"""

import concurrent.futures as cf
import json
import os

import kgen
import torch

from kgen.bench.results import poisoned_error
from kgen.bench.skinny import Operands, copy_bandwidth, time_batched
from kgen.ops.skinny import Skinny

OUT = os.environ.get("OUT", ".")
WEIGHTS = [tuple(int(v) for v in w.split("x")) for w in os.environ.get("WEIGHTS", "4096x4097,2816x7169").split(",")]
ROWS = {"float32": [int(r) for r in os.environ.get("F32_ROWS", "6,7,8,10,12,16").split(",")],
        "bfloat16": [int(r) for r in os.environ.get("B16_ROWS", "2,3,4,6,8,12,16").split(",")]}


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    bw = copy_bandwidth(torch, 7)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    print(f"{torch.cuda.get_device_name()}: copy bandwidth {bw / 1e12:.2f} TB/s", flush=True)
    cases = []
    for dtype, rows in ROWS.items():
        for order in ("weights", "row"):
            for n, k in WEIGHTS:
                for m in rows:
                    # weights: W is n x k (rows of k elements), B = W.t(); row: B is n x k (K x N).
                    N, K = (n, k) if order == "weights" else (k, n)
                    cases.append((dtype, order, m, N, K, Skinny.default_spec({"M": m, "N": N, "K": K}, dtype),
                                  Skinny.simt_default_spec({"M": m, "N": N, "K": K}, dtype)))
    specs = {s for c in cases for s in c[5:]}
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, specs))
    print(len(specs), "specs compiled", flush=True)
    out = []
    for dtype, order, M, N, K, tc, simt in cases:
        tdt = getattr(torch, dtype)
        item = torch.tensor([], dtype=tdt).element_size()
        ops = Operands(torch, M, N, K, dtype, "col" if order == "weights" else "row", l2)
        xs, Ws, Cs, copies = ops.A, ops.B, ops.C, ops.sets
        ref = xs[0].double() @ Ws[0].double()
        row = {"dtype": dtype, "order": order, "M": M, "N": N, "K": K,
               "bound_us": (N * K + M * K + M * N) * item / bw * 1e6}
        for name, spec in (("tc", tc), ("simt", simt)):
            k = kgen.build(spec)
            err = poisoned_error(lambda k=k, xs=xs, Ws=Ws, Cs=Cs: k(xs[0], Ws[0], out=Cs[0]), Cs[0], ref)
            assert err < (1e-5 if dtype == "float32" else 1e-2), (name, M, N, K, err)
            calls = [k.bind(xs[i], Ws[i], Cs[i]) for i in range(copies)]
            plan = list(k._plans.values())[-1]
            row[name] = {"us": time_batched(torch, calls, 7, max(copies, 30)), "err": err,
                         "entry": f"{plan.form} v{plan.width} s{plan.splits}", "spec": spec.to_json()}
        row["cublas_us"] = time_batched(torch, [lambda i=i, xs=xs, Ws=Ws, Cs=Cs: torch.matmul(xs[i], Ws[i], out=Cs[i])
                                                for i in range(copies)], 7, max(copies, 30))
        out.append(row)
        print(f"{dtype:8s} {order:7s} {M:3d}x{N}x{K}: tc {row['tc']['us']:6.1f} ({row['tc']['entry']}) "
              f"simt {row['simt']['us']:6.1f} ({row['simt']['entry']}) x{row['tc']['us'] / row['simt']['us']:.2f}  "
              f"bound {row['bound_us']:5.1f} cuBLAS {row['cublas_us']:6.1f}", flush=True)
    json.dump({"device": torch.cuda.get_device_name(), "bandwidth": bw, "rows": out},
              open(f"{OUT}/skinny_unaligned_forms.json", "w"), indent=1)


if __name__ == "__main__":
    main()
