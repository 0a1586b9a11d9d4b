"""Rendering: a pure function from a spec to CUDA C source text."""
from __future__ import annotations

import contextlib
import functools
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

import jinja2

from .. import __version__
from .spec import Spec


def template_dir() -> Path:
    """The templates folder: kgen/templates in an installed wheel, ../templates in a checkout."""
    package = Path(__file__).resolve().parent.parent  # kgen/
    for candidate in (package / "templates", package.parent / "templates"):
        if (candidate / "common.cuh.j2").is_file():
            return candidate
    raise FileNotFoundError(f"kgen's templates were not found next to {package}; reinstall kgen")


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_dir())),
        undefined=jinja2.StrictUndefined,  # a typo in a template is an error, not empty text
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


def render(spec: Spec, standalone: bool = False, *, entries: Iterable[str] | None = None,
           _fault: str | None = None) -> str:
    """Render `spec` to CUDA C. Byte-identical output for equal specs.

    standalone=True appends a main() that allocates random inputs, launches, checks
    against a CPU reference and prints the time, so `nvcc -o x file.cu && ./x` works.
    entries: the entry points to keep (None: all), for a family whose spec.entry_units()
    is true: its template asks `wants(name)` of each large entry point and keeps its small
    helper kernels always. Not with standalone (its main() launches entries of its own).
    _fault is for kgen.core.faults only: it plants a known bug to test the tests.
    """
    if not isinstance(spec, Spec):
        raise TypeError(f"render() takes a kgen spec (kgen.Matmul, kgen.Reduce, ...), got {type(spec).__name__}")
    kept = None if entries is None else frozenset(entries)
    if kept is not None:
        if standalone:
            raise ValueError("render(spec, standalone=True) renders every entry point: leave entries out")
        if not spec.entry_units():
            raise ValueError(f"entries={sorted(kept)} is not allowed for the {spec.kernel} family: "
                             "its module is compiled whole (spec.entry_units() is False)")
    template = _template(type(spec))
    context = {f: getattr(spec, f) for f in spec.to_dict() if f != "kernel"}
    context.update(
        spec=spec,
        spec_json=spec.to_json(),
        version=__version__,
        ctype=spec.ctype,
        standalone=standalone,
        fault=_fault,
        wants=(lambda name: True) if kept is None else kept.__contains__,
    )
    context.update(spec.template_context())
    return template.render(**context)


def _template(cls: type[Spec]) -> jinja2.Template:
    """The family's template: its own source (Spec.template_source()), or the file named by
    Spec.template in kgen's templates folder. Both see kgen's shared macros."""
    source = cls.template_source()
    if source is None:
        return environment().get_template(cls.template)
    return _from_source(source)


@functools.lru_cache(maxsize=64)
def _from_source(source: str) -> jinja2.Template:
    return environment().from_string(source)


def emit(spec: Spec, path, standalone: bool = False) -> Path:
    """Write the rendered source to `path` and return the path written.

    `path` is a file, or an existing folder to put `<family>_<key>.cu` in. An existing
    target must be a regular file; a symbolic link to a regular file is followed and the
    file it points to is replaced (the link stays). Anything else (a device, a FIFO, a
    socket, a dangling link) is refused with a ValueError, so emitting never turns a
    special file into a regular one. The write is atomic: rendered first, written to a
    short temporary name beside the target and renamed over it, so a failure (a bad spec,
    a full disk) never leaves a half-written file, and names up to the system's limit work.
    """
    if isinstance(path, str) and not path.strip():
        raise ValueError("the output path is empty: name a .cu file or a folder")
    path = Path(path)
    if path.is_dir():
        path = path / f"{spec.kernel}_{spec.key}{'_standalone' if standalone else ''}.cu"
    target = _regular_target(path)
    text = render(spec, standalone=standalone)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        from .cache import shareable_mode

        mode = shareable_mode(0o666)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".kgen-", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        _write_text(fd, text)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def _regular_target(path: Path) -> Path:
    """The file to replace for `path`: itself, or the regular file a symlink points to."""
    try:
        st = os.stat(path)  # follows links
    except FileNotFoundError:
        if path.is_symlink():
            raise ValueError(f"{path} is a symbolic link to {os.readlink(path)}, which does not exist; "
                             "emit writes only to regular files (or to a link to one)") from None
        if not path.parent.is_dir():
            raise FileNotFoundError(2, "the folder does not exist", str(path.parent)) from None
        return path
    if not stat.S_ISREG(st.st_mode):
        kind = _KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
        via = f" (through the link {path})" if path.is_symlink() else ""
        raise ValueError(f"{os.path.realpath(path)}{via} is {kind}; emit replaces only regular files: "
                         "name a new file, a regular file or a folder")
    return Path(os.path.realpath(path)) if path.is_symlink() else path


_KINDS = {stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device", stat.S_IFIFO: "a FIFO",
          stat.S_IFSOCK: "a socket"}


def _write_text(fd: int, text: str) -> None:
    """Write `text` to the open temporary file and close it (a function of its own, so tests
    can make it fail like a full disk)."""
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
