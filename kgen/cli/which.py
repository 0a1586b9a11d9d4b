"""`kgen which matmul MxNxK`: the kernel kgen.matmul runs for a product on a GPU, and why."""
from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

from .common import CLIError, add_device_options, shared_text, target_device

EXAMPLES = """examples:
  kgen which matmul 4x4096x4096 --dtype bfloat16                  # x @ W.t(), W of 4096 x 4096, on this GPU
  kgen which matmul 300x1024x4096 --row-major --compile           # B row-major; registers, spills, shared memory
  kgen which matmul 7x14336x4096 --arch sm_90 --gpu "NVIDIA H200"  # a GPU that is not here
  kgen which reduce 30000001 --op max                             # kgen.reduce(x, op="max") of that length
  kgen which dot 1048576 --dtype float64                          # kgen.dot(x, y)
"""

ORIGINS = {
    "exact": "tuned for this product on this GPU",
    "nearest": "tuned for a product near it on this GPU",
    "shipped": "the table kgen ships for this GPU",
    "default": "the family's rule (nothing tuned or shipped for this product on this GPU)",
}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("which", help="the kernel kgen.matmul, kgen.dot or kgen.reduce runs, and why",
                       formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXAMPLES,
                       description="Say which spec kgen.matmul(A, B) runs for a product of A (M x K) and B (K x N),\n"
                                   "or kgen.dot / kgen.reduce for a vector of a length, on this GPU or a named one;\n"
                                   "where it came from (a tuned entry, the shipped table or the family's rule); and\n"
                                   "with --compile what its kernels use. Nothing runs on a GPU: the answer is\n"
                                   "dispatch's, from the shapes, strides and dtype alone.")
    p.add_argument("call", choices=["matmul", "dot", "reduce"], help="the public call")
    p.add_argument("shape", metavar="MxNxK|LENGTH",
                   help="matmul: A of M x K rows times B of K x N; dot and reduce: the vectors' length")
    p.add_argument("--dtype", default="float32",
                   help="float32 (default), float64, float16 or bfloat16 (matmul); int32 too (reduce)")
    p.add_argument("--row-major", action="store_true",
                   help="matmul: B is a row-major K x N matrix (default: W.t() of an N x K weight, as "
                        "torch.nn.Linear stores it)")
    p.add_argument("--allow-tf32", action="store_true", help="matmul: the call passes allow_tf32=True")
    p.add_argument("--op", default="sum", choices=["sum", "min", "max"], help="reduce: the reduction (default sum)")
    p.add_argument("--db", metavar="FILE", help="the tuning database the call reads (default: KGEN_TUNE_DB or the "
                                               "user's)")
    p.add_argument("--compile", action="store_true",
                   help="compile the spec for the GPU's architecture (nvcc, no GPU needed) and print each entry "
                        "point's registers, spills and shared memory")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    add_device_options(p, "the GPU (default: this one)", "answer for this architecture (e.g. sm_90) without a GPU")
    p.set_defaults(func=run)


def changed_fields(spec: Any) -> dict[str, Any]:
    """The spec's fields whose values differ from its family's defaults, in field order."""
    out = {}
    for f in dataclasses.fields(spec):
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = dataclasses.MISSING
        value = getattr(spec, f.name)
        if value != default:
            out[f.name] = value
    return out


def answer(args: argparse.Namespace) -> dict[str, Any]:
    """What `kgen which` reports, as data."""
    from ..tune import ahead, dispatch

    if args.call == "matmul":
        if args.op != "sum":
            raise CLIError("--op goes with 'kgen which reduce', not matmul")
        if args.dtype not in ahead.DTYPES:
            raise CLIError(f"--dtype {args.dtype!r} is not allowed: one of {', '.join(ahead.DTYPES)}")
        try:
            M, N, K = ahead.parse_sides(args.shape, "MNK")
        except ValueError as exc:
            raise CLIError(str(exc)) from None
        product = ahead.Product(M, N, K, args.dtype, not args.row_major, args.allow_tf32)
        label = product.label()
        device = target_device(args, "answer for")
        A, B = product.stand_ins()
        try:
            choice, spec = dispatch.call_choice(A, B, product.allow_tf32, device=device, db=args.db,
                                                dtype=product.dtype)
        except (ValueError, TypeError) as exc:
            raise CLIError(f"{label}: {exc}") from None
    else:
        if args.row_major or args.allow_tf32:
            raise CLIError(f"--row-major and --allow-tf32 go with 'kgen which matmul', not {args.call}")
        if args.call == "dot" and args.op != "sum":
            raise CLIError("--op goes with 'kgen which reduce'; dot is its own reduction")
        op = "dot" if args.call == "dot" else args.op
        if not args.shape.isdigit() or int(args.shape) < 1:
            raise CLIError(f"{args.shape!r} is not a length: a whole number of at least 1 (e.g. 1048576)")
        n = int(args.shape)
        label = f"{args.dtype} {op} of {n} elements"
        device = target_device(args, "answer for")
        try:
            choice, spec = dispatch.reduce_choice(n, op, args.dtype, device=device, db=args.db)
        except (ValueError, TypeError) as exc:
            raise CLIError(str(exc)) from None
    report: dict[str, Any] = {
        "call": args.call,
        "product": label,
        "device": {"name": device.name, "arch": device.arch, "multiprocessors": device.limits.get("multiprocessors")},
        "family": spec.kernel,
        "class": type(spec).__name__,
        "form": spec.form(),
        "origin": choice.origin,
        "why": ORIGINS.get(choice.origin, choice.origin),
        "adapted_to_operands": spec != choice.spec,
        "changed_fields": {k: list(v) if isinstance(v, tuple) else v for k, v in changed_fields(spec).items()},
        "key": spec.key,
        "spec": json.loads(spec.to_json()),
    }
    if choice.origin in ("exact", "nearest"):
        report["tuned"] = {"problem": choice.tuned_problem, "ms": choice.tuned_ms, "distance": choice.distance}
    if args.compile:
        from ..core.kernel import compile as compile_spec

        report["resources"] = compile_spec(spec, device.arch).resources
    return report


def run(args: argparse.Namespace) -> int:
    report = answer(args)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    dev = report["device"]
    print(f"call      kgen.{report['call']} on {report['product']}")
    print(f"GPU       {dev['name']} ({dev['arch']}, {dev['multiprocessors']} SMs)")
    print(f"family    kgen.{report['class']} ({report['family']}): {report['form']}")
    why = report["why"]
    if "tuned" in report:
        t = report["tuned"]
        why += f": {t['problem']} ran in {t['ms']:.4f} ms there (bucket distance {t['distance']:.2f})"
    print(f"from      {why}")
    if report["adapted_to_operands"]:
        print("          then adapted to the call's operands (their storage order and alignment)")
    changed = ", ".join(f"{k}={v!r}" for k, v in report["changed_fields"].items())
    print(f"fields    {changed or 'the family defaults'}")
    print(f"key       {report['key']}")
    print(f"spec      {json.dumps(report['spec'], separators=(',', ':'))}")
    for name, res in sorted(report.get("resources", {}).items()):
        print(f"kernel    {name}: {res.get('registers', 0)} regs, {shared_text(res)}, "
              f"{res.get('spill_stores', 0)} B spilled")
    print("source    kgen render SPEC (the spec above, quoted) prints its CUDA C")
    return 0
