"""Field variants of the tensor-core skinny forms' default specs, one or two fields changed at a
time, on few-row shapes (bfloat16 with either storage order of the weight, float32 with W.t()):
device time of bound launches over rotated copies of the weight (median of 7 batches), every
variant's result first checked against float64 on a NaN-poisoned output.

    python skinny_tc_sweep.py                   # output: $OUT/skinny_tc_sweep.json
    SHAPES=bfloat16:row:4x4096x4096,float32:weights:8x4096x4096 python skinny_tc_sweep.py
    ONLY="waves=2" SHAPES=... python skinny_tc_sweep.py    # the default against named variants only"""

import concurrent.futures as cf
import itertools
import json
import os

import kgen
import torch

from kgen.bench.results import poisoned_error
from kgen.bench.skinny import Operands, copy_bandwidth, time_batched
from kgen.ops.skinny import Skinny

OUT = os.environ.get("OUT", ".")
DEFAULT_SHAPES = ("bfloat16:row:4x4096x4096,bfloat16:row:8x14336x4096,bfloat16:row:12x4096x11008,"
                  "bfloat16:row:6x4097x4096,bfloat16:weights:4x4096x4096,bfloat16:weights:8x11008x4096,"
                  "bfloat16:weights:14x4096x14336,float32:weights:8x4096x4096,float32:weights:12x4096x11008,"
                  "float32:weights:16x5120x5120,float32:row:10x4096x4096,float32:row:16x11008x4096")


def variants(base: Skinny) -> list[tuple[str, Skinny]]:
    only = [v for v in os.environ.get("ONLY", "").split(";") if v]
    if only:   # e.g. ONLY="waves=1;waves=2": just these, each a comma list of field=value
        out = [("default", base)]
        for label in only:
            fields = dict(kv.split("=") for kv in label.split(","))
            typed = {f: type(getattr(base, f))(v) if not isinstance(getattr(base, f), bool) else v == "True"
                     for f, v in fields.items()}
            out.append((label, base.replace(**typed)))
        return out
    out, seen = [("default", base)], {base}
    grid = {"loads": (4, 16, 32), "threads": (128, 512), "waves": (1, 3, 4), "tc_tiles": (1, 2),
            "merge": ("single_pass", "two_pass"), "min_blocks": (2,)}
    if base.dtype in ("float16", "bfloat16"):
        grid.update(k_warps=(1, 2, 8), axpy_k_warps=(1, 2, 8), lane_vectors=(1, 2))
    singles = [(f, v) for f, vs in grid.items() for v in vs]
    for combo in [[s] for s in singles] + [list(p) for p in itertools.combinations(singles, 2)
                                           if p[0][0] != p[1][0] and p[0][0] in ("loads", "waves", "k_warps",
                                                                                 "axpy_k_warps")
                                           and p[1][0] in ("loads", "waves", "k_warps", "axpy_k_warps", "threads")]:
        try:
            s = base.replace(**dict(combo))
        except ValueError:
            continue
        if s not in seen:
            seen.add(s)
            out.append((",".join(f"{f}={v}" for f, v in combo), s))
    return out


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    bw = copy_bandwidth(torch, 7)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    cases = []
    for item in os.environ.get("SHAPES", DEFAULT_SHAPES).split(","):
        dtype, order, shape = item.split(":")
        M, N, K = (int(v) for v in shape.split("x"))
        base = Skinny.default_spec({"M": M, "N": N, "K": K}, dtype)
        cases.append((dtype, order, M, N, K, variants(base)))
    specs = {s for c in cases for _, s in c[5]}
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, specs))
    print(f"{torch.cuda.get_device_name()}: copy bandwidth {bw / 1e12:.2f} TB/s, {len(specs)} specs", flush=True)
    rows = []
    for dtype, order, M, N, K, vs in cases:
        tdt = getattr(torch, dtype)
        item = torch.tensor([], dtype=tdt).element_size()
        ops = Operands(torch, M, N, K, dtype, "col" if order == "weights" else "row", l2)
        xs, Ws, Cs, copies = ops.A, ops.B, ops.C, ops.sets
        ref = xs[0].double() @ Ws[0].double()
        bound = (N * K + M * K + M * N) * item / bw * 1e6
        base_us = None
        for label, spec in vs:
            k = kgen.build(spec)
            err = poisoned_error(lambda k=k, xs=xs, Ws=Ws, Cs=Cs: k(xs[0], Ws[0], out=Cs[0]), Cs[0], ref)
            ok = err < (1e-5 if dtype == "float32" else 1e-2)
            us = time_batched(torch, [k.bind(xs[i], Ws[i], Cs[i]) for i in range(copies)], 7, max(copies, 30))
            base_us = base_us or us
            rows.append({"dtype": dtype, "order": order, "M": M, "N": N, "K": K, "variant": label,
                         "spec": spec.to_json(), "us": us, "bound_us": bound, "ok": ok, "err": err})
            print(f"{dtype:8s} {order:7s} {M}x{N}x{K} {label:32s} {us:7.1f} us ({bound / us:4.0%})"
                  f" x{base_us / us:4.2f}{'' if ok else ' WRONG'}", flush=True)
    json.dump({"device": torch.cuda.get_device_name(), "bandwidth": bw, "rows": rows},
              open(f"{OUT}/skinny_tc_sweep.json", "w"), indent=1)


if __name__ == "__main__":
    main()
