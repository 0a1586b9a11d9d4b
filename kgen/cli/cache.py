"""`kgen cache info|clear|fill`: the compiled-kernel cache."""
from __future__ import annotations

import argparse
import sys

from .common import CLIError, CommandFailed, add_device_options, count, target_device

FILL_EXAMPLES = """examples:
  kgen cache fill --weights 4096x4096,11008x4096,4096x11008 --rows 1-256 --dtype bfloat16
  kgen cache fill --config path/to/config.json --rows 1-128 --dtype bfloat16
  kgen cache fill --shape 7x4096x4096 --shape 300x1024x4096 --dtype float32,bfloat16
  kgen cache fill --weights 5120x5120 --rows 1-64 --arch sm_90 --gpu "NVIDIA H200"   # no GPU here
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cache", help="show, clear or fill the compiled-kernel cache",
                       formatter_class=argparse.RawDescriptionHelpFormatter, epilog=FILL_EXAMPLES,
                       description="Show the compiled-kernel cache (folder, entries, size and its limit), remove\n"
                                   "its entries, or fill it ahead with what kgen.matmul runs for your products, so\n"
                                   "that their first calls load kernels instead of waiting for nvcc. The folder is\n"
                                   "KGEN_CACHE_DIR (default: the user cache folder); KGEN_CACHE_MAX_MB bounds its\n"
                                   "size (default 2048): past it, the least recently used kernels are removed.")
    p.add_argument("action", choices=["info", "clear", "fill"],
                   help="info: folder, entries, size; clear: remove the entries; fill: compile ahead")
    fill = p.add_argument_group("fill: the products (kgen.matmul(A, B) with A of M x K rows)")
    fill.add_argument("--weights", action="append", default=[], metavar="NxK[,NxK...]",
                      help="weights of N x K (a layer's output and input sides), each multiplied by every "
                           "row count of --rows")
    fill.add_argument("--config", metavar="FILE",
                      help="a decoder's config.json (as Hugging Face transformers writes it): the weights of its "
                           "attention and MLP projections and its output head, each multiplied by every row count "
                           "of --rows")
    fill.add_argument("--rows", default="1-256", metavar="COUNTS",
                      help="row counts (tokens in a batch) for --weights and --config: a range and/or a list, "
                           "e.g. 1-256 "
                           "(the default) or 1,2,4,8-16")
    fill.add_argument("--shape", action="append", default=[], metavar="MxNxK", help="one product (repeatable)")
    fill.add_argument("--dtype", default="float32", metavar="DTYPE[,DTYPE...]",
                      help="float32 (default), float64, float16, bfloat16, or several")
    fill.add_argument("--row-major", action="store_true",
                      help="B is a row-major K x N matrix (default: W.t() of an N x K weight, as torch.nn.Linear "
                           "stores it)")
    fill.add_argument("--allow-tf32", action="store_true", help="the calls pass allow_tf32=True")
    add_device_options(p, "fill: the GPU (default: this one)",
                       "compile for this architecture (e.g. sm_90) without a GPU")
    run_opts = p.add_argument_group("fill: the run")
    run_opts.add_argument("--workers", type=count(0, "0 (one compile after another) or more nvcc runs at a time"),
                          help="nvcc runs at a time (default: one fewer than the CPU count, at least 1; 0: one "
                               "after another)")
    run_opts.add_argument("--db", metavar="FILE", help="the tuning database the calls read (default: KGEN_TUNE_DB "
                                                      "or the user's)")
    run_opts.add_argument("--dry-run", action="store_true", help="count the specs and what the cache holds; "
                                                                "compile nothing")
    # Every option but the action is fill's: what they hold when not given, for run() to tell.
    unset = {k: v for k, v in vars(p.parse_args(["info"])).items() if k != "action"}
    p.set_defaults(func=run, fill_defaults=unset)


def run(args: argparse.Namespace) -> int:
    from ..core.cache import CacheClearError, DiskCache, disabled

    given = [k for k, v in args.fill_defaults.items() if getattr(args, k) != v]
    if args.action != "fill" and given:
        raise CLIError(f"the product, GPU and run options ({', '.join('--' + k.replace('_', '-') for k in given)}) "
                       f"go with 'kgen cache fill', not 'kgen cache {args.action}'")
    store = DiskCache()
    if args.action == "fill":
        return _fill(args, store)
    if args.action == "info":
        entries = store.entries()
        print(f"folder    {store.dir}{' (disk cache disabled by KGEN_NO_CACHE)' if disabled() else ''}")
        print(f"entries   {len(entries)}")
        print(f"size      {store.size() / 1e6:.2f} MB of at most {store.limit_bytes / 1e6:.0f} MB (KGEN_CACHE_MAX_MB)")
        return 0
    try:
        removed = store.clear()
    except CacheClearError as exc:
        if exc.removed:
            print(f"removed {exc.removed} entries from {store.dir}")
        raise CommandFailed(str(exc)) from None
    print(f"removed {removed} entries from {store.dir}")
    return 0


def _fill(args: argparse.Namespace, store) -> int:
    from ..core.cache import disabled
    from ..tune import ahead

    if disabled():
        raise CLIError("the disk cache is disabled (KGEN_NO_CACHE): kernels compiled ahead would be lost; "
                       "unset KGEN_NO_CACHE")
    if not args.weights and not args.shape and not args.config:
        raise CLIError("name the products: --weights NxK or --config FILE (with --rows), and/or --shape MxNxK")
    dtypes = [d.strip() for d in args.dtype.split(",") if d.strip()]
    for d in dtypes:
        if d not in ahead.DTYPES:
            raise CLIError(f"--dtype {d!r} is not allowed: one of {', '.join(ahead.DTYPES)}")
    weight_t = not args.row_major
    try:
        weights = [ahead.parse_sides(w, "NK") for item in args.weights for w in item.split(",") if w.strip()]
        rows = ahead.parse_rows(args.rows)
        shapes = [ahead.parse_sides(s, "MNK") for s in args.shape]
        if args.config:
            weights += [w for w in ahead.config_weights(_read_config(args.config)) if w not in weights]
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    products = ahead.layer_products(weights, rows, dtypes, weight_t, args.allow_tf32)
    products += [ahead.Product(M, N, K, d, weight_t, args.allow_tf32) for d in dtypes for (M, N, K) in shapes]
    device = target_device(args, "fill the cache for")
    done = [0]

    def on_done(spec, why) -> None:
        done[0] += 1
        state = "compiled" if why is None else f"FAILED: {why}"
        print(f"[{done[0]}] {spec.kernel} {spec.key[:12]} {state}", file=sys.stderr, flush=True)

    report = ahead.compile_ahead(products, device=device, workers=args.workers, db=args.db, on_done=on_done,
                                 dry_run=args.dry_run)
    print(report.summary())
    print(f"cache     {store.dir}")
    if args.dry_run:
        print(f"dry run: {len(report.specs) - report.cached} specs would be compiled")
    if report.failed:
        for spec, why in report.failed:
            print(f"failed    {spec.to_json()}: {why}")
        raise CommandFailed(f"{len(report.failed)} of {len(report.specs)} specs failed to compile (listed above)")
    return 0


def _read_config(path: str) -> dict:
    import json

    try:
        with open(path, encoding="utf-8") as fh:
            config = json.load(fh)
    except OSError as exc:
        raise CLIError(f"cannot read --config {path}: {exc.strerror}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise CLIError(f"--config {path} is not JSON ({exc})") from None
    if not isinstance(config, dict):
        raise CLIError(f"--config {path} holds a JSON {type(config).__name__}, not an object of a model's settings")
    # A multimodal model's config keeps its language model's settings under text_config.
    return config.get("text_config", config) if "hidden_size" not in config else config
