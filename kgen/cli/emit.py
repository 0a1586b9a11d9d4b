"""`kgen emit SPEC -o TARGET`: write the CUDA C source of a spec to a file or a folder."""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from .common import CLIError, load_spec
from .render import SPEC_HELP


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "emit", help="write the CUDA C source of a spec to a file",
        description="Write the CUDA C source of a spec to a file. TARGET is a .cu file, an existing folder, or a "
                    "new folder written with a trailing slash (newdir/). An existing file is replaced atomically; "
                    "a symbolic link to a regular file is followed (the link stays); a device, FIFO, socket or "
                    "dangling link is refused.")
    p.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
    p.add_argument("-o", "--output", required=True, metavar="TARGET",
                   help="the .cu file to write, or a folder (a trailing slash creates it) for <family>_<key>.cu")
    p.add_argument("--standalone", action="store_true", help="append a main() that checks and times the kernel")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..core.render import emit

    text = args.output
    if not text.strip():
        raise CLIError("-o/--output is empty: name a .cu file or a folder")
    spec = load_spec(args.spec)
    out = Path(text)
    if text.endswith(("/", os.sep)):
        if out.exists() and not out.is_dir():
            raise CLIError(f"-o {text!r} names a folder (trailing slash) but {out} is not one")
        if not out.exists():
            if not out.parent.is_dir():
                raise CLIError(f"the folder {out.parent} does not exist (so {text} cannot be created in it)")
            try:
                out.mkdir()
            except OSError as exc:
                raise CLIError(f"cannot create the folder {out}: {exc.strerror}") from None
    elif not out.is_dir() and not out.parent.is_dir():
        raise CLIError(f"the folder {out.parent} does not exist")
    print(emit(spec, out, standalone=args.standalone))
    return 0
