"""The `kgen` command: one module per subcommand (render, emit, info, cache, demo, bench,
tune, which), each adding its parser with add_parser() and running it with run()."""
from __future__ import annotations

import argparse
import sys

from .. import __version__
from . import bench, cache, demo, emit, info, render, tune, which
from .common import run_command, setup_logging

COMMANDS = (render, emit, info, cache, demo, bench, tune, which)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The whole command line. Given `argv`, a benchmark's options are loaded only when the
    command is `bench` (they import numpy), so other commands start quickly."""
    p = argparse.ArgumentParser(prog="kgen", description="Render, compile, run, benchmark and tune CUDA kernels "
                                                         "from specs. 'kgen COMMAND --help' lists a command's options.")
    p.add_argument("--version", action="version", version=f"kgen {__version__}")
    p.add_argument("-v", "--verbose", action="count", default=0,
                   help="more diagnostics on stderr (-v: what kgen does, -vv: debugging detail)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    words = [a for a in (argv or []) if not a.startswith("-")]
    for module in COMMANDS:
        if module is bench:
            bench.add_parser(sub, full=argv is None or (bool(words) and words[0] == "bench"))
        else:
            module.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    own = bench.delegated(argv)
    if own is not None:  # a benchmark that parses its own options
        bench_main, words = own
        setup_logging(argv.count("-v") + 2 * argv.count("-vv") + argv.count("--verbose"))
        return run_command(lambda _: bench_main(words), None)
    args = build_parser(argv).parse_args(argv)
    setup_logging(args.verbose)
    return run_command(args.func, args)


if __name__ == "__main__":
    sys.exit(main())
