"""`kgen tune ...`: the autotuner from the command line.

    kgen tune matmul --shape 4096x4096x4096 [--strategy guided] [--plot tune.png]
    kgen tune reduce --op dot --n 268435456
    kgen tune matmul --shape 4096x4096x4096 --dry-run --arch sm_90     # no GPU needed
    kgen tune list                                                       # what the database holds
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from .. import ops as _families  # noqa: F401 - registers every family
from ..tune.plot import plot_records
from ..tune.records import TuneError, TuneResult
from ..tune.tuner import STRATEGIES, autotune


class ProgressBar:
    """One status line on stderr, redrawn in place on a terminal, printed now and then otherwise."""

    def __init__(self, stream=None, width: int = 28):
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.width = width
        self.t0 = time.perf_counter()
        self._last = 0.0
        self._drawn = False

    def __call__(self, ev: dict[str, Any]) -> None:
        now = time.perf_counter()
        done, target = ev.get("done", 0), max(ev.get("target", 0), 1)
        final = ev.get("phase") == "leaders"
        if not self.tty and not final and now - self._last < 5.0:
            return
        self._last = now
        filled = min(self.width, int(self.width * done / target))
        best = ev.get("best_ms", float("inf"))
        best_txt = f"best {best:.4f} ms" if best != float("inf") else "best -"
        text = (f"[{'#' * filled}{'.' * (self.width - filled)}] {done}/{target} evaluated | "
                f"compiled {ev.get('compiled', 0)}/{ev.get('submitted', 0)} | launched {ev.get('launched', 0)} | "
                f"{best_txt} | {now - self.t0:5.1f} s")
        if final:
            text += f" | re-timing {ev.get('leaders', 0)} leaders"
        if self.tty:
            self.stream.write("\r" + text[:160].ljust(160))
            self._drawn = True
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()


def _shape(text: str) -> dict[str, int]:
    parts = text.lower().replace("*", "x").split("x")
    if len(parts) != 3 or not all(p.strip().isdigit() for p in parts):
        raise TuneError(f"--shape {text!r} is not allowed: use MxNxK with positive integers, e.g. 4096x4096x4096")
    M, N, K = (int(p) for p in parts)
    return {"M": M, "N": N, "K": K}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kgen tune", description="Autotune a kernel family for one problem.")
    p.add_argument("family", help="matmul, reduce (or another registered family), or 'list' to show the database")
    p.add_argument("--shape", help="matmul: MxNxK, e.g. 4096x4096x4096")
    p.add_argument("--n", type=int, help="reduce: the vector length")
    p.add_argument("--op", default="dot", help="reduce: sum, dot, min or max (default dot)")
    p.add_argument("--problem", help="any family: the problem as JSON, e.g. '{\"M\": 64, \"N\": 64, \"K\": 64}'")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--strategy", default="guided", choices=STRATEGIES)
    p.add_argument("--max-configs", type=int, help="most candidates to launch and time")
    p.add_argument("--time-budget", type=float, help="seconds after which no new candidate is started")
    p.add_argument("--where", action="append", default=[], metavar="FIELD=V1,V2",
                   help="restrict the space to specs whose FIELD is one of the values (repeatable); "
                        "tuples as 128x128x8, booleans as true/false")
    p.add_argument("--force", action="store_true", help="tune again even if the database has this problem")
    p.add_argument("--no-resume", action="store_true", help="ignore candidate records of an earlier run")
    p.add_argument("--db", help="tuning database file (default: tune.sqlite3 in the cache folder)")
    p.add_argument("--workers", type=int, help="compile processes (default: CPU count; 0 = in-process)")
    p.add_argument("--seed", type=int)
    p.add_argument("--top", type=int, default=10, help="rows in the final table (default 10)")
    p.add_argument("--plot", help="write time per candidate against its parameters (.png needs matplotlib; .svg not)")
    p.add_argument("--json", help="write the whole result (every record) as JSON")
    p.add_argument("--compare", action="store_true",
                   help="after tuning, time the winner against torch (cuBLAS) in the same process")
    p.add_argument("--dry-run", action="store_true", help="no GPU: enumerate, prune and compile only")
    p.add_argument("--arch", help="with --dry-run: the architecture to compile for (default sm_90)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def _value(text: str) -> Any:
    t = text.strip()
    if t.lower() in ("true", "false"):
        return t.lower() == "true"
    if "x" in t and all(p.isdigit() for p in t.split("x")):
        return tuple(int(p) for p in t.split("x"))
    try:
        return int(t)
    except ValueError:
        return t


def _where(items: list[str]) -> dict[str, list] | None:
    out: dict[str, list] = {}
    for item in items:
        field, sep, values = item.partition("=")
        if not sep or not field.strip() or not values.strip():
            raise TuneError(f"--where {item!r} is not allowed: use FIELD=V1,V2 (e.g. --where stages=2,3)")
        out.setdefault(field.strip(), []).extend(_value(v) for v in values.split(","))
    return out or None


def _problem(args) -> dict[str, Any]:
    if args.problem:
        try:
            return json.loads(args.problem)
        except json.JSONDecodeError as exc:
            raise TuneError(f"--problem is not valid JSON: {exc.msg}") from None
        except RecursionError:
            raise TuneError("--problem is nested too deeply: give a flat JSON object") from None
    if args.family == "matmul":
        if not args.shape:
            raise TuneError("kgen tune matmul needs --shape MxNxK (e.g. --shape 4096x4096x4096)")
        return _shape(args.shape)
    if args.family == "reduce":
        if args.n is None:
            raise TuneError("kgen tune reduce needs --n LENGTH (and --op, default dot)")
        return {"n": args.n, "op": args.op}
    raise TuneError(f"kgen tune {args.family} needs --problem JSON")


def main(argv: list[str]) -> int:
    from ..tune.db import TuneDBError

    args = _parser().parse_args(argv)
    try:
        if args.family == "list":
            return _list(args)
        return _tune(args)
    except TuneDBError as exc:  # locked, damaged, a folder, a newer schema: the message says what to do
        print(f"kgen tune: {exc}", file=sys.stderr)
        return 1
    except TuneError as exc:
        print(f"kgen tune: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:  # a bad problem or dtype, named by the family
        print(f"kgen tune: {exc}", file=sys.stderr)
        return 2


def _list(args) -> int:
    from ..tune.db import open_db

    db = open_db(args.db, read_only=True)
    rows = db.all_results()
    print(f"{len(rows)} tuned problem(s) in {db.path}")
    for r in rows:
        s = r["summary"]
        print(f"  {r['family']:7s} {r['dtype']:8s} {json.dumps(r['problem'], sort_keys=True):40s} "
              f"{r['best_ms']:9.4f} ms  {r['strategy']:10s} {r['device']} ({r['arch']}), "
              f"{s.get('counts', {}).get('timed', '?')} timed")
    return 0


def _tune(args) -> int:
    from ..core.spec import families

    if args.family not in families():
        raise TuneError(f"unknown family {args.family!r}; allowed: {sorted(families())} or 'list'")
    if args.arch and not args.dry_run:
        raise TuneError("--arch only goes with --dry-run (a real tune compiles for the GPU it runs on)")
    problem = _problem(args)
    bar = None if args.quiet else ProgressBar()
    t0 = time.perf_counter()
    try:
        result = autotune(args.family, problem, args.dtype, strategy=args.strategy, max_configs=args.max_configs,
                          time_budget_s=args.time_budget, db=args.db, force=args.force, resume=not args.no_resume,
                          dry_run=args.dry_run, arch=args.arch, workers=args.workers, seed=args.seed, progress=bar,
                          restrict=_where(args.where))
    finally:
        if bar is not None:
            bar.close()
    wall = time.perf_counter() - t0
    out: dict[str, Any] = result.to_dict()
    out["wall_s"] = wall
    if args.dry_run:
        _print_dry(result)
    else:
        _print_result(result, args.top, wall)
        if args.compare:
            out["compare"] = _compare(result)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
        print(f"result written to {args.json}")
    if args.plot and not args.dry_run:
        title = f"{result.family} {json.dumps(result.problem)} {result.dtype} on {result.device} ({result.strategy})"
        try:
            plot_records(result.records, args.plot, title)
        except TuneError as exc:  # the tune itself succeeded and is stored: say why there is no plot
            print(f"kgen tune: no plot: {exc}", file=sys.stderr)
            return 1
        print(f"plot written to {args.plot}")
    return 0


def _counts_line(c: dict[str, int]) -> str:
    return (f"space {c.get('space', 0)} -> {c.get('candidates', 0)} candidates after pruning "
            f"({c.get('pruned_before_compile', 0)} pruned before compiling); {c.get('pruned_by_ptxas', 0)} pruned "
            f"on ptxas' report, {c.get('compile_errors', 0)} compile errors, {c.get('launched', 0)} launched, "
            f"{c.get('wrong_results', 0)} wrong results, {c.get('launch_errors', 0)} launch errors, "
            f"{c.get('timed', 0)} timed" + (f", {c['resumed']} resumed from the database" if c.get("resumed") else ""))


def _print_result(r: TuneResult, top: int, wall: float) -> None:
    from ..core.spec import families

    head = f"{r.family} {r.dtype} {json.dumps(r.problem)} on {r.device} ({r.arch}), strategy {r.strategy}"
    print(head)
    if r.from_db:
        print(f"from the tuning database in {wall:.3f} s (use --force to tune again)")
    else:
        print(f"{_counts_line(r.counts)}; {r.elapsed_s:.1f} s")
    cls = families()[r.family]
    work = cls.work(r.problem, r.dtype)
    rate = ""
    if r.best_ms:
        s = r.best_ms / 1e3
        rate = f" ({work['flops'] / s / 1e12:.2f} TFLOP/s, {work['bytes'] / s / 1e9:.0f} GB/s)"
    print(f"best {r.best_ms:.4f} ms{rate}: {r.best.to_json() if r.best else '-'}")
    if r.note:
        print(r.note)
    print(r.table(top))


def _print_dry(r: TuneResult) -> None:
    print(f"{r.family} {r.dtype} {json.dumps(r.problem)}: dry run for {r.arch}")
    print(_counts_line(r.counts) + f"; {r.elapsed_s:.1f} s")
    compiled = r.by_status("compiled")
    print(f"{len(compiled)} compiled and kept:")
    from ..tune.records import _field_text, _varying_fields

    varying = _varying_fields([x.spec for x in r.records]) or []
    print(f"  {'regs':>5} {'smem B':>7} {'stack':>6} {'spill':>6}  " + "  ".join(varying))
    for rec in compiled:
        res = rec.resources or {}
        regs = max((v.get("registers", 0) for v in res.values()), default=0)
        smem = max((v.get("shared_bytes", 0) for v in res.values()), default=0)
        stack = max((v.get("stack_bytes", 0) for v in res.values()), default=0)
        spill = max((v.get("spill_stores", 0) for v in res.values()), default=0)
        print(f"  {regs:>5} {smem:>7} {stack:>6} {spill:>6}  " + "  ".join(_field_text(rec.spec, f) for f in varying))
    for status in ("pruned", "compile-error"):
        bad = r.by_status(status)
        if bad:
            print(f"{status}: {len(bad)}")
            for rec in bad[:8]:
                print(f"  {rec.spec.to_json()}: {rec.reason}")
            if len(bad) > 8:
                print(f"  ... and {len(bad) - 8} more")


def _compare(r: TuneResult) -> dict[str, Any]:
    """Time the winner and torch's equivalent (cuBLAS for matmul) the same way, same process."""
    import numpy as np

    from ..core.kernel import build
    from ..core.spec import families
    from ..core.timing import time_calls

    try:
        import torch
    except ImportError:
        print("--compare: torch is not installed; skipped")
        return {"error": "torch not installed"}
    cls = families()[r.family]
    rng = np.random.default_rng(0)
    host = cls.make_inputs(r.problem, r.dtype, rng)
    dev = [torch.from_numpy(np.ascontiguousarray(a)).cuda() for a in host]
    shape = tuple(cls.output_shape(r.problem)) or (1,)
    out = torch.empty(shape, dtype=dev[0].dtype, device="cuda")
    k = build(r.best)
    torch.backends.cuda.matmul.allow_tf32 = False  # compare like with like: full fp32
    if r.family == "matmul":
        def peer():
            torch.matmul(dev[0], dev[1], out=out)
        peer_name = "torch.matmul (cuBLAS, TF32 off)"
    elif r.family == "reduce":
        op = r.problem["op"]
        fn = {"dot": lambda: torch.dot(dev[0], dev[1]), "sum": lambda: torch.sum(dev[0]),
              "min": lambda: torch.min(dev[0]), "max": lambda: torch.max(dev[0])}[op]
        peer, peer_name = fn, f"torch.{op if op != 'sum' else 'sum'}"
    else:
        return {"error": f"no peer for {r.family}"}
    mine = time_calls(lambda: k(*dev, out=out), warmup=5, repeats=50, flush_l2=True)
    theirs = time_calls(peer, warmup=5, repeats=50, flush_l2=True)
    ratio = theirs.median_ms / mine.median_ms
    print(f"compare: kgen {mine.median_ms:.4f} ms vs {peer_name} {theirs.median_ms:.4f} ms "
          f"-> kgen runs at {ratio:.3f}x the peer's speed")
    return {"kgen_ms": mine.median_ms, "peer": peer_name, "peer_ms": theirs.median_ms, "speed_vs_peer": ratio}
