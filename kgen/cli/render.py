"""`kgen render SPEC`: print the CUDA C source of a spec."""
from __future__ import annotations

import argparse
import sys

from .common import load_spec

SPEC_HELP = "the spec as inline JSON (e.g. '{\"kernel\": \"matmul\"}') or a JSON file"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("render", help="print the CUDA C source of a spec",
                       description="Print the CUDA C source of a spec on stdout.")
    p.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
    p.add_argument("--standalone", action="store_true", help="append a main() that checks and times the kernel")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..core.render import render

    sys.stdout.write(render(load_spec(args.spec), standalone=args.standalone))
    return 0
