"""`kgen tune ...`: the autotuner from the command line.

    kgen tune matmul --shape 4096x4096x4096 [--strategy guided] [--plot tune.png]
    kgen tune reduce --op dot --n 268435456
    kgen tune matmul --shape 4096x4096x4096 --dry-run --arch sm_90     # no GPU needed
    kgen tune list                                                       # what the database holds
"""
from __future__ import annotations

import argparse
import json
import logging
import re
import shutil
import subprocess
import sys
import textwrap
import time
from typing import Any, Iterable

from ..core.compiler import default_workers
from .common import CLIError, CommandFailed, count, run_command

log = logging.getLogger(__name__)

STRATEGIES = ("exhaustive", "random", "guided")
# A dry run compiles at most this many candidates unless --max-configs says otherwise.
DRY_RUN_BOUND = 64
# For the estimate a dry run prints before compiling: nvcc takes about this long for one
# matmul candidate on one core (0.4 to 1 s measured); kernels already cached take none.
SECONDS_PER_COMPILE = 1.0

DESCRIPTION = """\
Autotune a kernel family for one problem on this GPU, store the winner in the
tuning database (kgen.matmul, kgen.dot and kgen.reduce use it from then on) and
print the fastest candidates. Without a GPU, --dry-run enumerates, prunes and
compiles only.

FAMILY is matmul (with --shape), reduce (with --n and --op), another registered
family (with --problem), or 'list' to show what the database holds."""

EPILOG = """\
examples:
  kgen tune matmul --shape 4096x4096x4096
  kgen tune reduce --op dot --n 268435456
  kgen tune matmul --shape 4096x4096x4096 --dry-run --arch sm_90
  kgen tune matmul --shapes shapes.txt --cluster local
  kgen tune list

The result table's columns: median ms (the median of the candidate's timed
runs), spread (the interquartile range of those runs over their median: how
noisy the figure is), n (how many timed runs), regs (registers per thread),
smem B (shared memory per block, dynamic included)."""


def _max_configs(text: str) -> int | str:
    if text.strip().lower() == "all":
        return "all"
    return count(1, "a positive number of candidates, or 'all'")(text)


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("family", metavar="FAMILY", help="matmul, reduce (or another registered family), or 'list'")
    prob = p.add_argument_group("the problem")
    prob.add_argument("--shape", metavar="MxNxK", help="matmul: MxNxK, e.g. 4096x4096x4096")
    prob.add_argument("--n", type=count(1, "a positive vector length"), metavar="LENGTH",
                      help="reduce: the vector length")
    prob.add_argument("--op", default="dot", help="reduce: sum, dot, min or max (default dot)")
    prob.add_argument("--problem", metavar="JSON",
                      help="any family: the problem as JSON, e.g. '{\"M\": 64, \"N\": 64, \"K\": 64}' (skinny "
                           "tuned for x @ W.t(): add \"layout_b\": \"col\")")
    prob.add_argument("--dtype", default="float32",
                      help="element type: float32 (default), float64, or int32 for reduce")
    prob.add_argument("--shapes", metavar="FILE",
                      help="a catalogue: one problem a line (MxNxK for matmul, LENGTH [OP] for reduce, or a JSON "
                           "object; '#' starts a comment), tuned one after another; problems the database holds "
                           "are skipped, so an interrupted run resumes")
    prob.add_argument("--cluster", nargs="?", const="local", metavar="ADDRESS|local",
                      help="tune on the GPU workers of a Dask cluster: --cluster alone (or 'local') starts one "
                           "worker per GPU of this machine; or give a scheduler address (tcp://HOST:8786) or a "
                           "scheduler file (.json). Needs pip install 'kgen[cluster]' (docs/cluster.md)")
    search = p.add_argument_group("the search")
    search.add_argument("--strategy", choices=STRATEGIES,
                        help="guided (default): a model picks what to try next; random; exhaustive: every "
                             "candidate in order (a bounded dry run samples at random unless one is named)")
    search.add_argument("--max-configs", type=_max_configs, metavar="N|all",
                        help="most candidates to compile and time (default: guided and random a third of the "
                             f"candidates, exhaustive all of them; a dry run {DRY_RUN_BOUND}); 'all' lifts the bound")
    search.add_argument("--time-budget", type=float, metavar="SECONDS",
                        help="seconds after which no new candidate is started")
    search.add_argument("--where", action="append", default=[], metavar="FIELD=V1,V2",
                        help="restrict the space to specs whose FIELD is one of the values (repeatable); "
                             "tuples as 128x128x8, booleans as true/false")
    search.add_argument("--workers", type=count(0, "0 (compile in this process) or more compile processes"),
                        metavar="N",
                        help=f"compile processes (default: one fewer than the CPU count, at least 1: "
                             f"{default_workers()} here; 0 compiles in this process)")
    search.add_argument("--seed", type=int, help="seed of the random choices (and of the test data)")
    db = p.add_argument_group("the tuning database")
    db.add_argument("--db", metavar="FILE",
                    help="database file (default: KGEN_TUNE_DB, else tune.sqlite3 in the cache folder)")
    db.add_argument("--force", action="store_true", help="tune again even if the database has this problem")
    db.add_argument("--no-resume", action="store_true",
                    help="do not reuse candidate records the database holds for this problem")
    dry = p.add_argument_group("without a GPU")
    dry.add_argument("--dry-run", action="store_true",
                     help=f"enumerate, prune and compile only (at most {DRY_RUN_BOUND} candidates unless "
                          "--max-configs says otherwise); needs nvcc, no GPU")
    dry.add_argument("--arch", help="with --dry-run: the architecture to compile for (default sm_90)")
    out = p.add_argument_group("output")
    out.add_argument("--top", type=count(1, "a positive number of rows"), default=10, metavar="N",
                     help="rows in the final table (default 10)")
    out.add_argument("--plot", metavar="FILE",
                     help="write time per candidate against its parameters (.png or .svg; needs matplotlib)")
    out.add_argument("--json", metavar="FILE", help="write the whole result (every record) as JSON")
    out.add_argument("--compare", action="store_true",
                     help="after tuning, time the winner against torch (cuBLAS) in the same process")
    out.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tune", help="autotune a family for a problem (or tune list)", description=DESCRIPTION,
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    p.set_defaults(func=run)


def parser() -> argparse.ArgumentParser:
    return add_arguments(argparse.ArgumentParser(prog="kgen tune", description=DESCRIPTION, epilog=EPILOG,
                                                 formatter_class=argparse.RawDescriptionHelpFormatter))


def main(argv: list[str]) -> int:
    """`kgen tune` on its own: parse `argv` (the words after `kgen tune`) and run."""
    return run_command(run, parser().parse_args(argv))


def run(args: argparse.Namespace) -> int:
    from .. import ops  # noqa: F401 - registers every family
    from ..tune.db import TuneDBError

    try:
        if args.family == "list":
            return _list(args)
        return _tune(args)
    except TuneDBError as exc:  # locked, damaged, a folder, a newer schema: the message says what to do
        raise CommandFailed(str(exc)) from None


# ---------------------------------------------------------------------------------------
# Arguments
# ---------------------------------------------------------------------------------------

def _shape(text: str) -> dict[str, int]:
    parts = text.lower().replace("*", "x").split("x")
    if len(parts) != 3 or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
        raise CLIError(f"--shape {text!r} is not allowed: use MxNxK with positive integers, e.g. 4096x4096x4096")
    M, N, K = (int(p) for p in parts)
    return {"M": M, "N": N, "K": K}


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


def _where(items: list[str]) -> dict[str, Iterable[Any]] | None:
    from ..tune.records import TuneError

    out: dict[str, list] = {}
    for item in items:
        field, sep, values = item.partition("=")
        if not sep or not field.strip() or not values.strip():
            raise TuneError(f"--where {item!r} is not allowed: use FIELD=V1,V2 (e.g. --where stages=2,3)")
        out.setdefault(field.strip(), []).extend(_value(v) for v in values.split(","))
    return dict(out) if out else None


def _problem(args) -> dict[str, Any]:
    if args.problem:
        try:
            problem = json.loads(args.problem)
        except json.JSONDecodeError as exc:
            raise CLIError(f"--problem is not valid JSON: {exc.msg}") from None
        except RecursionError:
            raise CLIError("--problem is nested too deeply: give a flat JSON object") from None
        if not isinstance(problem, dict):
            raise CLIError(f"--problem must be a JSON object (e.g. '{{\"n\": 1024}}'), got {type(problem).__name__}")
        return problem
    if args.family == "matmul":
        if not args.shape:
            raise CLIError("kgen tune matmul needs --shape MxNxK (e.g. --shape 4096x4096x4096)")
        return _shape(args.shape)
    if args.family == "reduce":
        if args.n is None:
            raise CLIError("kgen tune reduce needs --n LENGTH (and --op, default dot)")
        return {"n": args.n, "op": args.op}
    raise CLIError(f"kgen tune {args.family} needs --problem JSON")


def _columns() -> int:
    """Width to wrap plain messages to: the terminal's, at most 100."""
    return min(shutil.get_terminal_size((100, 24)).columns, 100) - 1


def _nvcc_archs() -> list[str]:
    """The sm_XY codes this nvcc compiles for ([] when it cannot say)."""
    from ..core.compiler import find_nvcc

    try:
        proc = subprocess.run([find_nvcc(), "--list-gpu-code"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return []
    codes = re.findall(r"\bsm_\d+[af]?\b", proc.stdout) if proc.returncode == 0 else []
    return sorted(set(codes), key=lambda a: int(re.sub(r"\D", "", a)))


def _check_arch(arch: str) -> str:
    from ..core.compiler import check_arch

    check_arch(arch)
    known = _nvcc_archs()
    if known and re.sub(r"[af]$", "", arch) not in known:
        raise CLIError(f"--arch {arch} is not an architecture this nvcc compiles for; allowed: {', '.join(known)} "
                       "(with an a or f suffix where the toolkit has one, e.g. sm_90a)")
    return arch


# ---------------------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------------------

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


def _dry_run_plan(cls, problem: dict[str, Any], dtype: str, arch: str, where: dict[str, Iterable[Any]] | None,
                  bound: int | None, workers: int, sample: bool) -> tuple[str, bool]:
    """What a dry run will do, said before it compiles anything: the space, the candidates
    left after pruning, how many of them it compiles, and roughly how long that takes; and
    whether the bound leaves candidates out."""
    from ..tune.device import arch_limits

    problem = cls.normalize_problem(problem)
    limits = arch_limits(arch)
    space = cls.search_space(problem, dtype)
    if where:
        def text(v):
            return json.dumps(list(v) if isinstance(v, tuple) else v)

        allowed = {f: {text(v) for v in vals} for f, vals in where.items()}
        space = [s for s in space if all(text(getattr(s, f, None)) in ok for f, ok in allowed.items())]
    candidates = sum(1 for s in space if not s.prune_reason(problem, limits))
    todo = candidates if bound is None else min(bound, candidates)
    seconds = SECONDS_PER_COMPILE * todo / max(workers, 1)
    est = f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"
    what = f"dry run for {arch}: {len(space)} specs in the space, {candidates} candidates after pruning; "
    if todo < candidates:
        what += (f"compiling {'a random sample of ' if sample else ''}{todo} of them (--max-configs N or "
                 "--max-configs all compiles more)")
    else:
        what += f"compiling {'all ' if todo > 1 else ''}{todo}"
    procs = f"{workers} compile process{'es' if workers != 1 else ''}" if workers else "this process"
    return f"{what}, in {procs}: about {est} (kernels already in the cache take no time)", todo < candidates


def _tune(args) -> int:
    from ..core.spec import families
    from ..tune.records import TuneError
    from ..tune.tuner import autotune
    from .progress import TuneProgress

    if args.family not in families():
        raise CLIError(f"unknown family {args.family!r}; allowed: {sorted(families())} or 'list'")
    if args.arch and not args.dry_run:
        raise CLIError("--arch only goes with --dry-run (a real tune compiles for the GPU it runs on)")
    if args.shapes or args.cluster:
        from .catalogue import tune_catalogue_command

        return tune_catalogue_command(args, where=_where(args.where), dry_run_bound=DRY_RUN_BOUND,
                                      arch=_check_arch(args.arch or "sm_90") if args.dry_run else None)
    problem = _problem(args)
    workers = default_workers() if args.workers is None else args.workers
    max_configs = args.max_configs
    if max_configs == "all":
        max_configs = None
    elif max_configs is None and args.dry_run:
        max_configs = DRY_RUN_BOUND
    where = _where(args.where)
    strategy = args.strategy or "guided"
    arch = None
    if args.dry_run:
        arch = _check_arch(args.arch or "sm_90")
        cls = families()[args.family]
        # A bounded dry run times nothing, so no model can guide it: a random sample of the
        # space says more about it than the first candidates in the space's order.
        sample = args.strategy is None
        plan, bounded = _dry_run_plan(cls, problem, args.dtype, arch, where, max_configs, workers, sample)
        if bounded and sample:
            strategy = "random"
        print(textwrap.fill(plan, width=_columns(), subsequent_indent="  "), flush=True)
    note = None
    if args.family == "matmul" and not args.problem:
        # Said before the run too: a user may rather tune the family that runs the shape.
        from ..tune import ahead

        note = _dispatch_note(problem, args.dtype, ahead.stand_in_device(arch) if arch else None)
        if note:
            print(textwrap.fill(note, width=_columns()), flush=True)
    bar = None if args.quiet else TuneProgress(dry_run=args.dry_run)
    t0 = time.perf_counter()
    try:
        result = autotune(args.family, problem, args.dtype, strategy=strategy, max_configs=max_configs,
                          time_budget_s=args.time_budget, db=args.db, force=args.force, resume=not args.no_resume,
                          dry_run=args.dry_run, arch=arch, workers=workers, seed=args.seed, progress=bar,
                          restrict=where)
    except Exception as exc:
        no_gpu = sys.modules.get("kgen.core.runtime")
        if no_gpu is not None and isinstance(exc, no_gpu.NoGPUError):
            why = str(exc).strip()
            raise CLIError(f"{why}{'' if why.endswith('.') else '.'} Without a GPU, add --dry-run to enumerate, "
                           f"prune and compile the candidates only (kgen tune {args.family} ... --dry-run "
                           "[--arch sm_90])") from None
        if isinstance(exc, TuneError):
            raise CLIError(str(exc)) from None
        raise
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
        if note:
            print(textwrap.fill(note, width=_columns()))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
        print(f"result written to {args.json}")
    if args.plot and not args.dry_run:
        from ..tune.plot import plot_records

        title = f"{result.family} {json.dumps(result.problem)} {result.dtype} on {result.device} ({result.strategy})"
        try:
            plot_records(result.records, args.plot, title)
        except TuneError as exc:  # the tune itself succeeded and is stored: say why there is no plot
            raise CommandFailed(f"no plot: {exc}") from None
        print(f"plot written to {args.plot}")
    if args.dry_run and not result.by_status("compiled") and result.by_status("compile-error"):
        first = result.by_status("compile-error")[0].reason or ""
        raise CommandFailed(f"none of the {len(result.by_status('compile-error'))} candidates compiled for "
                            f"{result.arch}; the first error: {first.splitlines()[0] if first else '-'}")
    return 0


def _dispatch_note(problem: dict[str, Any], dtype: str, device: Any = None) -> str | None:
    """What to run instead when kgen.matmul takes this shape to another family than the
    tiled one tuned (which it then does not use), on this GPU or `device`."""
    from ..tune.dispatch import shape_family

    M, N, K = problem["M"], problem["N"], problem["K"]
    try:
        fam = shape_family(M, N, K, dtype, device)
    except Exception:  # noqa: BLE001 - a note, never a failure
        return None
    if fam.kernel == "matmul":
        return None
    gpu = "this GPU" if device is None else f"{device.arch}"
    where = f"note: kgen.matmul runs {M}x{N}x{K} {dtype} on the {fam.kernel} family on {gpu}, not on the tiled one"
    if fam.kernel == "tensor_matmul" and dtype == "float32":
        return (f"{where} (three TF32 products at float32 accuracy, split_tf32, which runs its own default); "
                "this result applies with KGEN_SPLIT_TF32=0.")
    problem_json = json.dumps({"M": M, "N": N, "K": K}, separators=(",", ":"))
    note = f"{where}; to tune what it runs: kgen tune {fam.kernel} --problem '{problem_json}' --dtype {dtype}"
    if fam.kernel == "skinny":
        # The skinny forms differ by the large operand's storage order: a W.t() call runs the dot
        # forms, tuned under their own problem.
        note += " (for x @ W.t(), add \"layout_b\": \"col\" to the problem)"
    return note


def _counts_line(c: dict[str, int]) -> str:
    return (f"space {c.get('space', 0)} -> {c.get('candidates', 0)} candidates after pruning "
            f"({c.get('pruned_before_compile', 0)} pruned before compiling); {c.get('pruned_by_ptxas', 0)} pruned "
            f"on ptxas' report, {c.get('compile_errors', 0)} compile errors, {c.get('launched', 0)} launched, "
            f"{c.get('wrong_results', 0)} wrong results, {c.get('launch_errors', 0)} launch errors, "
            f"{c.get('timed', 0)} timed" + (f", {c['resumed']} resumed from the database" if c.get("resumed") else ""))


def _print_result(r, top: int, wall: float) -> None:
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


def _print_dry(r) -> None:
    from ..tune.records import _field_text, _varying_fields

    print(f"{r.family} {r.dtype} {json.dumps(r.problem)}: dry run for {r.arch}")
    print(_counts_line(r.counts) + f"; {r.elapsed_s:.1f} s")
    if r.note:
        print(r.note)
    compiled = r.by_status("compiled")
    print(f"{len(compiled)} compiled and kept (smem B: shared memory per block as launched, dynamic included):")
    varying = _varying_fields([x.spec for x in r.records]) or []
    print(f"  {'regs':>5} {'smem B':>7} {'stack':>6} {'spill':>6}  " + "  ".join(varying))
    for rec in compiled:
        regs, smem, stack, spill = (_most(rec.resources, k) for k in
                                    ("registers", "shared_bytes", "stack_bytes", "spill_stores"))
        print(f"  {regs:>5} {smem:>7} {stack:>6} {spill:>6}  " + "  ".join(_field_text(rec.spec, f) for f in varying))
    for status in ("pruned", "compile-error"):
        bad = r.by_status(status)
        if bad:
            print(f"{status}: {len(bad)}")
            for rec in bad[:8]:
                print(f"  {rec.spec.to_json()}: {rec.reason}")
            if len(bad) > 8:
                print(f"  ... and {len(bad) - 8} more")


def _most(resources: dict[str, dict[str, int]] | None, key: str) -> int:
    """The largest figure `key` over a candidate's entry points."""
    return max((v.get(key, 0) for v in (resources or {}).values()), default=0)


def _compare(r) -> dict[str, Any]:
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
        peer, peer_name = fn, f"torch.{op}"
    else:
        return {"error": f"no peer for {r.family}"}
    mine = time_calls(lambda: k(*dev, out=out), warmup=5, repeats=50, flush_l2=True)
    theirs = time_calls(peer, warmup=5, repeats=50, flush_l2=True)
    ratio = theirs.median_ms / mine.median_ms
    print(f"compare: kgen {mine.median_ms:.4f} ms vs {peer_name} {theirs.median_ms:.4f} ms "
          f"-> kgen runs at {ratio:.3f}x the peer's speed")
    return {"kgen_ms": mine.median_ms, "peer": peer_name, "peer_ms": theirs.median_ms, "speed_vs_peer": ratio}
