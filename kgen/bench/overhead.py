"""Host time per call of kgen's entry points beside torch's, the way users call them.

    kgen bench overhead [--json FILE]

For each entry point, on small problems where the launch, not the kernel, is the cost:
  pipelined  N back-to-back calls, then one synchronize: host microseconds per call
             (what a loop of calls costs the Python thread);
  single     one call then a synchronize, repeated: wall microseconds per call
             (what a call costs when its result is needed at once).
Every kgen entry point is timed after a first call (the compile and the choice are
memoised then), with an empty tuning database unless KGEN_TUNE_DB names one.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any, Callable


def _per_call_us(fn: Callable[[], Any], sync: Callable[[], None], calls: int, single: bool) -> float:
    runs = []
    for _ in range(5):
        sync()
        t0 = time.perf_counter()
        if single:
            for _ in range(calls):
                fn()
                sync()
        else:
            for _ in range(calls):
                fn()
            sync()
        runs.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(runs)


def run(calls: int = 2000) -> dict[str, Any]:
    import torch

    import kgen
    from kgen.core import runtime

    torch.backends.cuda.matmul.allow_tf32 = False
    dev = "cuda"
    A = torch.randn(100, 100, device=dev)
    B = torch.randn(100, 100, device=dev)
    C = torch.empty(100, 100, device=dev)
    x = torch.randn(1 << 20, device=dev)
    y = torch.randn(1 << 20, device=dev)
    s0 = torch.empty((), device=dev)
    from kgen.tune.dispatch import select

    k = kgen.build(select(kgen.Matmul, {"M": 100, "N": 100, "K": 100}).spec)
    entries: dict[str, Callable[[], Any]] = {
        "kgen.matmul(A, B) 100^3": lambda: kgen.matmul(A, B),
        "kgen.matmul(A, B, out=C) 100^3": lambda: kgen.matmul(A, B, out=C),
        "built kernel k(A, B, out=C) 100^3": lambda: k(A, B, out=C),
        "torch.mm(A, B) 100^3": lambda: torch.mm(A, B),
        "torch.mm(A, B, out=C) 100^3": lambda: torch.mm(A, B, out=C),
        "kgen.dot(x, y) 2^20": lambda: kgen.dot(x, y),
        "kgen.dot(x, y, out=s) 2^20": lambda: kgen.dot(x, y, out=s0),
        "torch.dot(x, y) 2^20": lambda: torch.dot(x, y),
        "kgen.reduce(x, op='sum') 2^20": lambda: kgen.reduce(x, op="sum"),
        "torch.sum(x) 2^20": lambda: torch.sum(x),
        "kgen.reduce(x, op='max') 2^20": lambda: kgen.reduce(x, op="max"),
        "torch.max(x) 2^20": lambda: torch.max(x),
    }
    sync = torch.cuda.synchronize
    rows = []
    for name, fn in entries.items():
        fn()
        sync()
        rows.append({"entry": name, "pipelined_us": round(_per_call_us(fn, sync, calls, False), 2),
                     "single_us": round(_per_call_us(fn, sync, max(200, calls // 5), True), 2)})
    return {"device": runtime.device().name(), "calls": calls, "rows": rows}


def table(result: dict[str, Any]) -> str:
    lines = [f"host time per call on {result['device']} ({result['calls']} calls, median of 5)",
             f"{'entry point':40s} {'pipelined µs':>13s} {'single µs':>10s}"]
    for r in result["rows"]:
        lines.append(f"{r['entry']:40s} {r['pipelined_us']:13.2f} {r['single_us']:10.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kgen bench overhead", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=2000, help="calls per timing (default 2000)")
    ap.add_argument("--json", help="also write the result as JSON here")
    args = ap.parse_args(argv)
    result = run(args.calls)
    print(table(result))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
