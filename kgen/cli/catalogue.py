"""`kgen tune FAMILY --shapes FILE [--cluster [ADDRESS|local]]`: tune a catalogue of problems,
in this process or on the GPU workers of a Dask cluster (kgen.tune.catalogue)."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Iterable

from ..core.compiler import default_workers
from .common import CLIError, CommandFailed


def _problems(args: argparse.Namespace) -> Any:
    """The catalogue file, or the one problem --shape, --n or --problem names (--cluster
    without --shapes tunes that one problem on the cluster)."""
    if args.shapes:
        if args.shape or args.n is not None or args.problem:
            raise CLIError("--shapes FILE names the problems: leave out --shape, --n and --problem")
        return args.shapes
    if args.problem:
        try:
            problem = json.loads(args.problem)
        except (ValueError, RecursionError):
            raise CLIError("--problem is not valid JSON: give a flat JSON object") from None
        return [problem]
    if args.shape:
        return [args.shape]
    if args.n is not None:
        return [{"n": args.n, "op": args.op}]
    raise CLIError(f"kgen tune {args.family} --cluster needs --shapes FILE (or one problem: --shape, --n or "
                   "--problem)")


def tune_catalogue_command(args: argparse.Namespace, *, where: dict[str, Iterable[Any]] | None,
                           arch: str | None, dry_run_bound: int) -> int:
    from ..tune.catalogue import tune_catalogue
    from ..tune.records import TuneError

    for flag, value in (("--plot", args.plot), ("--compare", args.compare)):
        if value:
            raise CLIError(f"{flag} goes with one problem (--shape), not with --shapes or --cluster")
    if args.dry_run and args.cluster:
        raise CLIError("--dry-run compiles in this process and launches nothing: leave out --cluster")
    max_configs = args.max_configs
    if max_configs == "all":
        max_configs = None
    elif max_configs is None and args.dry_run:
        max_configs = dry_run_bound
    strategy = args.strategy or "guided"
    if args.dry_run and args.strategy is None and max_configs is not None:
        strategy = "random"  # a bounded dry run times nothing: a sample of the space says more than its head
    workers = args.workers
    if workers is None and not args.cluster:
        workers = default_workers()  # on a cluster: each worker's share of its machine's CPUs
    try:
        result = tune_catalogue(args.family, _problems(args), args.dtype, strategy=strategy, max_configs=max_configs,
                                time_budget_s=args.time_budget, db=args.db, force=args.force,
                                resume=not args.no_resume, dry_run=args.dry_run, arch=arch, workers=workers,
                                seed=args.seed, restrict=where, op=args.op, cluster=args.cluster,
                                progress=not args.quiet, summary=True)
    except TuneError as exc:  # a bad catalogue, no Dask, an unreachable cluster: the message says what to do
        raise CLIError(str(exc)) from None
    except Exception as exc:
        runtime = sys.modules.get("kgen.core.runtime")
        if runtime is not None and isinstance(exc, runtime.NoGPUError):
            why = str(exc).strip().rstrip(".")
            raise CLIError(f"{why}. Without a GPU, add --dry-run to compile the catalogue's candidates only, or "
                           "tune on GPU machines with --cluster ADDRESS") from None
        raise
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result.to_dict(), fh, indent=1)
        print(f"result written to {args.json}")
    failed = result.with_status("failed")
    if failed:
        raise CommandFailed(f"{len(failed)} of {len(result.entries)} problem(s) failed; the first: "
                            f"{failed[0].label}: {failed[0].error}")
    return 0
