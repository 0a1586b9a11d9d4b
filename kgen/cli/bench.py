"""`kgen bench FAMILY ...`: benchmarks against the vendor library on this GPU.

A benchmark module that offers build_parser(parser) and main_args(args) gets a proper
subparser, so `kgen bench --help` and `kgen bench NAME --help` list its options from one
definition. One that only offers main(argv) parses its own options: the words after its
name go to it unchanged, and its usage is read from its own --help.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import io

BENCHMARKS = {
    "matmul": ("kgen.bench.matmul", "kgen's matmul against cuBLAS SGEMM (through torch or CuPy, TF32 off)"),
    "reduce": ("kgen.bench.reduce", "kgen's dot and sum against torch and CuPy, with the device's copy bandwidth"),
    "calls": ("kgen.bench.calls", "kgen.matmul / dot / reduce called as users call them, beside torch"),
    "overhead": ("kgen.bench.overhead", "host time per call of kgen's entry points beside torch's"),
    "decode": ("kgen.bench.skinny", "few-row (decode) products: kgen's skinny kernels as a share of the "
               "memory bound, beside cuBLAS"),
}


def _module(name: str):
    return importlib.import_module(BENCHMARKS[name][0])


def own_parser(name: str) -> bool:
    """Whether the benchmark `name` parses its own options (it has no build_parser)."""
    return not hasattr(_module(name), "build_parser")


def delegated(argv: list[str]):
    """If `argv` runs a benchmark that parses its own options: (its main, the words for it)."""
    words = [i for i, a in enumerate(argv) if not a.startswith("-")]
    if len(words) < 2 or argv[words[0]] != "bench" or words[1] != words[0] + 1:
        return None
    name = argv[words[1]]
    if name not in BENCHMARKS or not own_parser(name):
        return None
    return _module(name).main, argv[words[1] + 1:]


def _own_usage(name: str) -> str:
    """The usage block a self-parsing benchmark prints for --help."""
    text = io.StringIO()
    with contextlib.redirect_stdout(text), contextlib.suppress(SystemExit):
        _module(name).main(["--help"])
    block = text.getvalue().split("\n\n")[0].strip()
    if not block.startswith("usage: "):
        return f"  kgen bench {name} ..."
    return _indent_usage(block)


def _indent_usage(usage: str) -> str:
    # argparse indents a usage's continuation lines under "usage: ": two spaces do here.
    return usage.replace("usage: ", "  ", 1).replace("\n     ", "\n")


def add_parser(sub: argparse._SubParsersAction, full: bool = True) -> None:
    """`full=False` leaves out the benchmarks' options (importing them costs numpy) when
    the command line runs something else."""
    b = sub.add_parser("bench", help="benchmark a family against the vendor library",
                       description="Benchmark kgen against the vendor library on this GPU\n"
                                   "(needs pycuda, a CUDA device and torch or CuPy).",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    if not full:
        return
    families = b.add_subparsers(dest="family", required=True, metavar="NAME")
    usages = []
    for name, (module, help_text) in BENCHMARKS.items():
        if own_parser(name):
            families.add_parser(name, help=help_text, description=help_text)
            usages.append(_own_usage(name))
            continue
        p = families.add_parser(name, help=help_text, description=help_text)
        _module(name).build_parser(p)
        p.set_defaults(func=lambda args, module=module: importlib.import_module(module).main_args(args))
        usages.append(_indent_usage(p.format_usage().strip()))
    b.epilog = ("options of each benchmark:\n" + "\n".join(usages)
                + "\n\n'kgen bench NAME --help' explains each option.")
