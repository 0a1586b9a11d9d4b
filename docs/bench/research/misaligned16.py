"""Few-row 16-bit products whose weight rows lie off a 16-byte boundary (B = W.t() with K no
multiple of 8 elements): what kgen.matmul runs there against the same product with K rounded up
to a multiple of 8 (the aligned twin). For each product drawn at random (env SEED, COUNT, DTYPE,
ROWS, N_RANGE, K_RANGE; weights of MIN_MB or more; K redrawn until it is off a boundary),
device time of:
- the spec dispatch picks ("default"), and that spec with each of VARIANTS (';'-separated
  'field=value,...');
- with WG=1 (default), the transposed wgmma tiles that read such a weight in place as dispatch
  makes them from 17 rows ("wg in place": by row sets at an even pitch, by producer threads at an
  odd one; "wg row sets": by row sets at any pitch);
- where dispatch picks the transposed tiles by row sets a tile (TensorMatmul.classes_suits), what
  it picked before them ("without classes");
- with CLASSES=1 (default), what dispatch picks for the aligned twin (the transposed wgmma tiles)
  read by row sets a tile (with_classed_b: b_classes, the split fitted to the sets' tiles),
  reading this weight in place ("wg classes");
- with TWIN=1 (default), the same default spec on the aligned twin ("same spec, aligned") and
  what dispatch picks for the twin ("twin default");
each against the bandwidth bound of its own bytes (copy bandwidth of the same run), beside cuBLAS
through torch. Device time from a CUDA graph over operands rotated past L2
(kgen.bench.skinny.time_graph), ROUNDS times in turn (best kept), every result first checked
against float64 on a NaN-poisoned output. Output: $OUT/misaligned16_<SEED>.json."""
import json
import math
import os
import random

import torch

import kgen
from kgen.bench.skinny import Operands, copy_bandwidth, time_graph
from kgen.ops.skinny import Skinny, tolerance
from kgen.tune import dispatch
from simt_f32_variants import parse_variant   # run from this folder, as the other scripts here

SEED = int(os.environ.get("SEED", "30201"))
COUNT = int(os.environ.get("COUNT", "8"))
DTYPE = os.environ.get("DTYPE", "bfloat16")
ROWS = tuple(int(v) for v in os.environ.get("ROWS", "1-16").split("-"))
N_RANGE = tuple(int(v) for v in os.environ.get("N_RANGE", "1024-16384").split("-"))
K_RANGE = tuple(int(v) for v in os.environ.get("K_RANGE", "1024-16384").split("-"))
MIN_MB = float(os.environ.get("MIN_MB", "16"))
ROUNDS = int(os.environ.get("ROUNDS", "2"))
WG = os.environ.get("WG", "1") == "1"
TWIN = os.environ.get("TWIN", "1") == "1"   # 0: leave the aligned twin out
CLASSES = os.environ.get("CLASSES", "1") == "1"   # 0: leave the row sets a tile out
VARIANTS = [v for v in os.environ.get("VARIANTS", "phased=True;phased=False;k_warps=1;k_warps=2").split(";") if v]
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False


def draw(rng):
    while True:
        M = int(math.exp(rng.uniform(math.log(ROWS[0]), math.log(ROWS[1] + 1))))
        N, K = (int(math.exp(rng.uniform(math.log(lo), math.log(hi)))) for lo, hi in (N_RANGE, K_RANGE))
        if K % 8 and N * K * 2 >= MIN_MB * 1e6:
            return min(max(M, ROWS[0]), ROWS[1]), N, K


def spec_with(ops, rows_from, sets_at_odd):
    """The spec dispatch picks for ops' first product with the in-place wgmma rules
    (realign_swap_suits, phased_swap_suits) widened to rows_from rows and any side, and with
    sets_at_odd, row sets (b_phased) at an odd pitch too."""
    from kgen.ops import tensorcore
    kept = (tensorcore.REALIGN_SWAP_ROWS, tensorcore.REALIGN_SWAP_MAX_SIDE, tensorcore.PHASED_SWAP_ROWS,
            dispatch._phased_b)
    tensorcore.REALIGN_SWAP_ROWS = tensorcore.PHASED_SWAP_ROWS = (rows_from, 64)
    tensorcore.REALIGN_SWAP_MAX_SIDE = 1 << 30
    if sets_at_odd:
        dispatch._phased_b = lambda B: True
    try:
        dispatch.forget()
        return dispatch.call_spec(ops.A[0], ops.B[0])
    finally:
        (tensorcore.REALIGN_SWAP_ROWS, tensorcore.REALIGN_SWAP_MAX_SIDE, tensorcore.PHASED_SWAP_ROWS,
         dispatch._phased_b) = kept
        dispatch.forget()


def spec_without_classes(ops):
    """The spec dispatch picks for ops' first product with TensorMatmul.classes_suits answering
    False (what it picked before that rule)."""
    from kgen.ops.tensorcore import TensorMatmul

    kept = TensorMatmul.classes_suits
    TensorMatmul.classes_suits = classmethod(lambda cls, *a: False)
    try:
        dispatch.forget()
        return dispatch.call_spec(ops.A[0], ops.B[0])
    finally:
        TensorMatmul.classes_suits = kept
        dispatch.forget()


def classes_spec(M, N, K, K2):
    """What dispatch picks for the aligned twin (N x K2) read by row sets a tile
    (TensorMatmul.with_classed_b for the M x N x K product: its K split fitted to the sets' tiles),
    where that is the transposed wgmma tiles over K whole or in cluster slices; else None."""
    from kgen.ops.tensorcore import TensorMatmul

    dt = getattr(torch, DTYPE)
    A2 = torch.empty(M, K2, device="cuda", dtype=dt)
    B2 = torch.empty(N, K2, device="cuda", dtype=dt).t()
    twin = dispatch.call_spec(A2, B2)
    if not isinstance(twin, TensorMatmul) or not twin.swap_ab or twin.layout_b != "col":
        return None
    return twin.with_classed_b({"M": M, "N": N, "K": K})


def checked_us(ops, kern, K):
    """Device time of `kern` over ops (best of ROUNDS), after checking its result."""
    ref = ops.A[0].double() @ ops.B[0].double()
    ops.C[0].fill_(float("nan"))
    kern(ops.A[0], ops.B[0], out=ops.C[0])
    torch.cuda.synchronize()
    err = float((ops.C[0].double() - ref).norm() / ref.norm())
    assert math.isfinite(err) and err <= tolerance(DTYPE, K), (tuple(ops.A[0].shape), K, err)
    calls = [(lambda a=a, b=b, c=c: kern(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
    return min(time_graph(torch, calls, 15) for _ in range(ROUNDS)), err


def brief(spec):
    import dataclasses
    return type(spec).__name__ + " " + " ".join(
        f"{f.name}={getattr(spec, f.name)}" for f in dataclasses.fields(spec)
        if f.default is not dataclasses.MISSING and getattr(spec, f.name) != f.default)


def main():
    rng = random.Random(f"{SEED}-{DTYPE}")
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    bw = copy_bandwidth(torch, 20)
    print(f"{torch.cuda.get_device_name()}: copy bandwidth {bw / 1e12:.3f} TB/s; {DTYPE}; variants {VARIANTS}",
          flush=True)
    rows = []
    for _ in range(COUNT):
        M, N, K = draw(rng)
        K2 = -(-K // 8) * 8
        ops = Operands(torch, M, N, K, DTYPE, "col", l2)
        spec = dispatch.call_spec(ops.A[0], ops.B[0])
        bound = ops.bytes / bw * 1e6
        row = {"shape": [M, N, K], "spec": spec.to_json(), "bound_us": bound, "us": {}, "share": {}}
        ways = {"default": spec}
        if getattr(spec, "b_classes", False):
            ways["without classes"] = spec_without_classes(ops)
        if isinstance(spec, Skinny):
            for v in VARIANTS:
                try:
                    s = spec.replace(**parse_variant(v))
                except ValueError:
                    continue
                if s != spec:
                    ways[v] = s
        if WG:
            for name, odd in (("wg in place", False), ("wg row sets", True)):
                s = spec_with(ops, 1, odd)
                if s != spec and s not in ways.values():
                    ways[name] = s
                    row.setdefault("wg_specs", {})[name] = s.to_json()
                    print(f"  {name}: {brief(s)}", flush=True)
        if CLASSES:
            s = classes_spec(M, N, K, K2)
            if s is not None and s != spec:
                ways["wg classes"] = s
                row.setdefault("wg_specs", {})["wg classes"] = s.to_json()
        for name, s in ways.items():
            try:
                row["us"][name], _ = checked_us(ops, kgen.build(s), K)
            except AssertionError as exc:
                print(f"  {name}: WRONG RESULT {exc}", flush=True)
                row.setdefault("wrong", []).append(name)
        mm = lambda a, b, out: torch.matmul(a, b, out=out)   # noqa: E731
        row["us"]["cuBLAS"], _ = checked_us(ops, mm, K)
        for name, us in row["us"].items():
            row["share"][name] = bound / us
        del ops
        if TWIN:
            twin_shares(row, spec, M, N, K2, l2, bw)
        torch.cuda.empty_cache()
        rows.append(row)
        print(f"{M}x{N}x{K}: " + " ".join(f"{n} {v:.0%}" for n, v in row["share"].items()) + f" | {brief(spec)}"
              + (f" | twin: {row['twin_brief']}" if TWIN else ""), flush=True)
        with open(os.path.join(os.environ.get("OUT", "."), f"misaligned16_{SEED}.json"), "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "copy_bw": bw, "dtype": DTYPE, "rows": rows}, f)
    summary(rows)


def twin_shares(row, spec, M, N, K2, l2, bw):
    """Into row: the aligned twin's shares of its bound, for dispatch's own spec for it and for
    `spec` (where that spec takes it)."""
    twin = Operands(torch, M, N, K2, DTYPE, "col", l2)
    tbound = twin.bytes / bw * 1e6
    tspec = dispatch.call_spec(twin.A[0], twin.B[0])
    row["twin_spec"], row["twin_brief"] = tspec.to_json(), brief(tspec)
    us, _ = checked_us(twin, kgen.build(tspec), K2)
    row["share"]["twin default"] = tbound / us
    try:
        us, _ = checked_us(twin, kgen.build(spec), K2)
        row["share"]["same spec, aligned"] = tbound / us
    except Exception as exc:   # noqa: BLE001 - a spec for the odd pitch may not take the twin
        print(f"  same spec on the twin: {exc}", flush=True)
    del twin


def summary(rows):
    names = sorted({n for r in rows for n in r["share"]})
    for n in names:
        sel = [r["share"][n] for r in rows if n in r["share"]]
        print(f"{n}: {math.exp(sum(map(math.log, sel)) / len(sel)):.0%} of the bound (geometric mean of {len(sel)}; "
              f"{min(sel):.0%}-{max(sel):.0%})", flush=True)
    for n in names:
        pairs = [r["share"][n] / r["share"]["default"] for r in rows if n in r["share"] and n != "default"]
        if pairs:
            print(f"  {n}: x{math.exp(sum(map(math.log, pairs)) / len(pairs)):.3f} the default's share "
                  f"({len(pairs)})", flush=True)


if __name__ == "__main__":
    main()
