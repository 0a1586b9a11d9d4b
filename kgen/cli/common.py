"""What the subcommands share: the user-error type, reading a spec argument, argument
types, the GPU a command answers for (this one or one named by --arch, --gpu, --sms), and
running a command so that every failure a user can cause is one line."""
from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any, Callable

log = logging.getLogger("kgen.cli")


class CLIError(Exception):
    """A user mistake: printed as one line, exit status 2."""


class CommandFailed(Exception):
    """The command did what it could and some of it failed: one line, exit status 1."""


def load_spec(text: str):
    """A spec from inline JSON or from a JSON file."""
    from .. import ops  # noqa: F401 - registers the families a spec may name
    from ..core.spec import spec_from_json

    text = text.strip()
    if not text.startswith("{"):
        path = Path(text)
        if not path.is_file():
            raise CLIError(f"SPEC {text!r} is neither inline JSON (starting with '{{') nor an existing file")
        try:
            text = path.read_text()
        except OSError as exc:
            raise CLIError(f"cannot read spec file {path}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise CLIError(f"spec file {path} is not UTF-8 text (a JSON spec is expected)") from None
    return spec_from_json(text)


def count(minimum: int, what: str) -> Callable[[str], int]:
    """An argparse type: an integer of at least `minimum`."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"{text!r} is not allowed: {what}")
        return value

    parse.__name__ = "count"  # argparse names the type in some messages
    return parse


def _loaded(module: str, *names: str) -> tuple[type, ...]:
    """The named classes of `module` if it is imported: an exception can only be one of
    them if it is, so error handling never imports numpy or pycuda itself."""
    mod = sys.modules.get(module)
    return tuple(getattr(mod, n) for n in names if hasattr(mod, n)) if mod is not None else ()


def run_command(func: Callable[[Any], int], args: Any) -> int:
    """Run a subcommand; a user's mistake is one line on stderr and exit status 2, a partial
    failure one line and status 1, an interrupt status 130."""
    try:
        return int(func(args) or 0)
    except KeyboardInterrupt:
        print("kgen: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of stdout has gone (`kgen which ... | head -3`): stop quietly, as a shell tool
        # does on SIGPIPE, and point stdout at nothing so that flushing it at exit cannot raise.
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):  # a stdout with no file descriptor (an embedding's stream)
            pass
        return 141
    except CommandFailed as exc:
        print(f"kgen: error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - sorted below; anything else is a bug and traces back
        compile_error = _loaded("kgen.core.compiler", "CompileError")
        if compile_error and isinstance(exc, compile_error):
            print(f"kgen: error: {exc.summary}", file=sys.stderr)  # type: ignore[attr-defined]
            print(exc.output, file=sys.stderr)  # type: ignore[attr-defined]
            return 2
        clear_error = _loaded("kgen.core.cache", "CacheClearError")
        if clear_error and isinstance(exc, clear_error):
            print(f"kgen: error: {exc}", file=sys.stderr)
            return 1
        user = (CLIError, ValueError, TypeError, *_loaded("kgen.core.compiler", "ToolchainError"),
                *_loaded("kgen.core.runtime", "NoGPUError", "ArrayError"))
        if isinstance(exc, user):
            print(f"kgen: error: {exc}", file=sys.stderr)
            return 2
        tune_db_error = _loaded("kgen.tune.db", "TuneDBError")
        if tune_db_error and isinstance(exc, tune_db_error):
            print(f"kgen: error: {exc}", file=sys.stderr)
            return 1
        database_error = _loaded("sqlite3", "Error")
        if database_error and isinstance(exc, database_error):
            print(f"kgen: error: the tuning database failed: {exc}", file=sys.stderr)
            return 1
        if isinstance(exc, OSError):
            where = f": {exc.filename}" if exc.filename else ""
            print(f"kgen: error: {exc.strerror or exc}{where}", file=sys.stderr)
            return 2
        raise


def setup_logging(verbosity: int) -> None:
    """Diagnostics from kgen's loggers on stderr: warnings by default, -v info, -vv debug.
    A program using kgen as a library routes or silences them through `logging` itself."""
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logger = logging.getLogger("kgen")
    logger.setLevel(level)
    if not any(getattr(h, "_kgen_cli", False) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("kgen: %(levelname)s: %(message)s"))
        handler._kgen_cli = True  # type: ignore[attr-defined]
        logger.addHandler(handler)


def shared_text(res: dict[str, int]) -> str:
    """A launch's shared memory per block, saying how much of it is dynamic."""
    total, dynamic = res.get("shared_bytes", 0), res.get("dynamic_shared_bytes", 0)
    return f"{total} B shared/block" + (f" ({dynamic} B dynamic)" if dynamic else "")


def add_device_options(parser: argparse.ArgumentParser, title: str, arch_help: str) -> None:
    """--arch, --gpu and --sms: a GPU that need not be here (target_device reads them)."""
    dev = parser.add_argument_group(title)
    dev.add_argument("--arch", help=arch_help)
    dev.add_argument("--gpu", metavar="NAME",
                     help="with --arch: the GPU model's name as CUDA reports it (e.g. 'NVIDIA H200'), which picks "
                          "its shipped and tuned entries")
    dev.add_argument("--sms", type=count(1, "the GPU's multiprocessor count, at least 1"),
                     help="with --arch: the GPU's multiprocessor count (default: the architecture's flagship)")


def target_device(args: argparse.Namespace, purpose: str):
    """The GPU a command answers for: --arch (with --gpu, --sms) names one; else this machine's,
    built for KGEN_ARCH where that is set, as kgen.matmul would build; else KGEN_ARCH's alone.
    `purpose` ends the error without either: "no GPU to <purpose>"."""
    import dataclasses

    from ..core import runtime
    from ..tune import ahead

    if args.arch:
        return ahead.stand_in_device(args.arch, args.gpu, args.sms)
    if args.gpu or args.sms:
        raise CLIError("--gpu and --sms describe a GPU that is not here: give its --arch too")
    env_arch = os.environ.get("KGEN_ARCH", "").strip()
    ok, why = runtime.gpu_available()
    if not ok:
        if env_arch:
            return ahead.stand_in_device(env_arch)
        raise CLIError(f"no GPU to {purpose} ({why}): name one with --arch (e.g. --arch sm_90 --gpu "
                       "'NVIDIA H200')")
    from ..core.kernel import default_arch
    from ..tune.device import cuda_device_info

    here = cuda_device_info()
    return dataclasses.replace(here, arch=default_arch()) if env_arch else here
