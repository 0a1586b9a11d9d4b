"""16-bit few-row products against a B whose rows TMA cannot read (W.t() of a weight whose row
pitch K is no multiple of 8 elements, or a row-major B whose pitch N is not): what kgen.matmul
runs, the same product with B stored at an aligned pitch (the speed an unaligned B should
reach), and cuBLAS. Device time from a CUDA graph over operands rotated past L2; every result
checked against float64 first (outputs NaN-poisoned). Env: SEED, COUNT, ROWS (LO-HI), SIDES
(LO-HI of N and K), DTYPE, ORDER (col: B = W.t(); row: B stored K x N); SHAPES ("MxNxK,...")
replaces the draw; TAG names the output $OUT/realign_pitch_<ORDER>_<SEED>[_TAG].json. Run it in
two trees to compare them.
IN_PLACE=1 also times, where kgen.matmul runs another family, the tensor-core family reading B
in place (what kgen.matmul would run were the product routed there); SKINNY=1, where it runs the
tensor-core family, the skinny family's default for the product ("skinny"). OTHERS=1, where it runs
the tensor-core family: that family's spec for the layouts without b_realign (B copied to an
aligned pitch first, "copies") and mma.sync reading both operands in place (TensorMatmul.element_spec,
"element"). PHASED=0: a row-major B is read by the producer threads (b_realign, and the specs
for_layouts built for it) rather than by row sets (b_phased), to compare the two in one tree.
REALIGN_DEPTH=n: the fills of B the producer threads keep in flight
(kgen.ops.tensorcore.REALIGN_DEPTH) set to n in this process, to compare depths run by run."""
import json
import math
import os
import random

SEED = int(os.environ.get("SEED", "9101"))
COUNT = int(os.environ.get("COUNT", "12"))
LO, HI = (int(v) for v in os.environ.get("ROWS", "17-256").split("-"))
DTYPE = os.environ.get("DTYPE", "bfloat16")
ORDER = os.environ.get("ORDER", "col")
SIDE_LO, SIDE_HI = (int(v) for v in os.environ.get("SIDES", "1024-16384").split("-"))


def draw():
    """M log-uniform in LO..HI, N and K log-uniform in SIDES (1024-16384), B's pitch (K for W.t(), N
    for a row-major B) then moved off a multiple of 8 (odd in half the draws, 2, 4 or 6 modulo
    8 in the rest)."""
    if os.environ.get("SHAPES"):
        return [tuple(int(v) for v in s.split("x")) for s in os.environ["SHAPES"].split(",")]
    rng = random.Random(f"{SEED}-{DTYPE}-{LO}-{HI}")
    out = []
    for i in range(COUNT):
        M = min(HI, int(math.exp(rng.uniform(math.log(LO), math.log(HI + 1)))))
        N, K = (int(math.exp(rng.uniform(math.log(SIDE_LO), math.log(SIDE_HI)))) for _ in range(2))
        off = rng.choice((1, 3, 5, 7)) if i % 2 else rng.choice((2, 4, 6))
        if ORDER == "col":
            K = K - K % 8 + off
        else:
            N = N - N % 8 + off
        out.append((M, N, K))
    return out


def main():
    import concurrent.futures as cf

    import torch

    import kgen
    import kgen.core.kernel as kernel_module
    import kgen.ops.tensorcore as tensorcore
    if os.environ.get("REALIGN_DEPTH"):
        tensorcore.REALIGN_DEPTH = int(os.environ["REALIGN_DEPTH"])
    if os.environ.get("PHASED") == "0":
        tensorcore.TensorMatmul.with_phased_b = lambda self: self
    from kgen.bench.skinny import checked_graph_time
    from kgen.tune import dispatch
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    tdt = getattr(torch, DTYPE)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    shapes = draw()

    def pair(M, N, K, empty=False):
        """(B, the same values at an aligned pitch) of one product, stored as ORDER says."""
        make = (lambda *s: torch.empty(*s, device="cuda", dtype=tdt)) if empty else (
            lambda *s: torch.randn(*s, device="cuda").to(tdt))
        rows, cols = (N, K) if ORDER == "col" else (K, N)
        w = make(rows, cols)
        wa = torch.zeros(rows, -(-cols // 8) * 8, device="cuda", dtype=tdt)
        if not empty:
            wa[:, :cols].copy_(w)
        wa = wa[:, :cols]
        return (w.t(), wa.t()) if ORDER == "col" else (w, wa)

    # The specs both routes of every product run, found by calls whose build is cut short,
    # then compiled in parallel.
    found, build = [], kernel_module.build

    class Found(Exception):
        pass

    def record(spec, *args, **kw):
        found.append(spec)
        raise Found

    kernel_module.build = record
    for M, N, K in shapes:
        a = torch.empty(M, K, device="cuda", dtype=tdt)
        for b in pair(M, N, K, empty=True):
            try:
                kgen.matmul(a, b)
            except Found:
                pass
        if os.environ.get("IN_PLACE") == "1":
            from kgen.ops.tensorcore import TensorMatmul
            try:
                dispatch._kernel(TensorMatmul, {"M": M, "N": N, "K": K}, DTYPE, False,
                                 {"layout_a": "row", "layout_b": ORDER, "b_realign": True})
            except Found:
                pass
        if os.environ.get("SKINNY") == "1":
            from kgen.ops.skinny import Skinny
            try:
                dispatch._kernel(Skinny, {"M": M, "N": N, "K": K}, DTYPE, False, {})
            except Found:
                pass
        if os.environ.get("OTHERS") == "1":
            from kgen.ops.tensorcore import TensorMatmul
            try:
                dispatch._kernel(TensorMatmul, {"M": M, "N": N, "K": K}, DTYPE, False,
                                 {"layout_a": "row", "layout_b": ORDER})
            except Found:
                pass
            found.append(TensorMatmul.element_spec({"M": M, "N": N, "K": K}, DTYPE).replace(layout_b=ORDER))
    kernel_module.build = build
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, {s.key: s for s in found}.values()))
    torch.cuda.empty_cache()

    rows = []
    for M, N, K in shapes:
        per_set = (M * K + K * N + M * N) * 4
        sets = max(2, min(24, math.ceil(3 * l2 / per_set)))
        A = [torch.randn(M, K, device="cuda").to(tdt) for _ in range(sets)]
        pairs = [pair(M, N, K) for _ in range(sets)]
        B, Ba = [p[0] for p in pairs], [p[1] for p in pairs]
        C = [torch.empty(M, N, device="cuda", dtype=tdt) for _ in range(sets)]
        ref = A[0].double() @ B[0].double()
        kgen.matmul(A[0], B[0])
        kgen.matmul(A[0], Ba[0])
        route = dispatch._fast[("matmul", A[0].shape, A[0].stride(), B[0].shape, B[0].stride(), A[0].dtype, False)]
        aligned = dispatch._fast[("matmul", A[0].shape, A[0].stride(), Ba[0].shape, Ba[0].stride(), A[0].dtype,
                                  False)]
        ways = {"cublas": (None, B), "route": (route, B), "aligned": (aligned, Ba)}
        if os.environ.get("IN_PLACE") == "1" and type(route.spec).__name__ != "TensorMatmul":
            from kgen.ops.tensorcore import TensorMatmul
            ways["in_place"] = (dispatch._kernel(TensorMatmul, {"M": M, "N": N, "K": K}, DTYPE, False, {
                "layout_a": "row", "layout_b": ORDER, "b_realign": True}), B)
        if os.environ.get("SKINNY") == "1" and type(route.spec).__name__ == "TensorMatmul":
            from kgen.ops.skinny import Skinny
            ways["skinny"] = (dispatch._kernel(Skinny, {"M": M, "N": N, "K": K}, DTYPE, False, {}), B)
        if os.environ.get("OTHERS") == "1" and type(route.spec).__name__ == "TensorMatmul":
            from kgen.ops.tensorcore import TensorMatmul
            ways["copies"] = (dispatch._kernel(TensorMatmul, {"M": M, "N": N, "K": K}, DTYPE, False, {
                "layout_a": "row", "layout_b": ORDER}), B)
            ways["element"] = (kgen.build(TensorMatmul.element_spec({"M": M, "N": N, "K": K}, DTYPE)
                                          .replace(layout_b=ORDER)), B)
        row = {"shape": [M, N, K], "dtype": DTYPE, "order": ORDER, "route_spec": route.spec.to_json(),
               "aligned_spec": aligned.spec.to_json(),
               **({"in_place_spec": ways["in_place"][0].spec.to_json()} if "in_place" in ways else {})}
        for name, (k, Bs) in ways.items():
            def fn(a, b, c, k=k):
                return torch.matmul(a, b, out=c) if k is None else k(a, b, out=c)
            row[name + "_err"], row[name], _ = checked_graph_time(torch, fn, A, Bs, C, ref, 15)
        bad = [n for n in ways if not (math.isfinite(row[n + "_err"]) and row[n + "_err"] < 1e-2)]
        print(f"{M}x{N}x{K} {ORDER} ({type(route.spec).__name__}): cublas {row['cublas']:.1f} route "
              f"{row['route']:.1f} aligned {row['aligned']:.1f}"
              + (f" in place {row['in_place']:.1f} ({row['route'] / row['in_place']:.2f}x)" if "in_place" in row
                 else "")
              + (f" skinny {row['skinny']:.1f} ({row['route'] / row['skinny']:.2f}x)" if "skinny" in row else "")
              + "".join(f" {n} {row[n]:.1f} ({row['route'] / row[n]:.2f}x)" for n in ("copies", "element") if n in row)
              + f" | x cuBLAS {row['cublas'] / row['route']:.2f}"
              + (f" BAD {bad}" if bad else ""), flush=True)
        rows.append(row)
        A = B = Ba = C = pairs = None
        torch.cuda.empty_cache()
    tags = [t for t in (os.environ.get("TAG", ""), "phased0" if os.environ.get("PHASED") == "0" else "",
                        f"depth{tensorcore.REALIGN_DEPTH}" if os.environ.get("REALIGN_DEPTH") else "") if t]
    name = f"realign_pitch_{ORDER}_{SEED}{''.join('_' + t for t in tags)}.json"
    with open(os.path.join(os.environ.get("OUT", "."), name), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
