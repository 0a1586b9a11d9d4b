"""Rendering: a pure function from a spec to CUDA C source text."""
from __future__ import annotations

import functools
import os
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


def render(spec: Spec, standalone: bool = False) -> str:
    """Render `spec` to CUDA C. Byte-identical output for equal specs.

    standalone=True appends a main() that allocates random inputs, launches, checks
    against a CPU reference and prints the time, so `nvcc -o x file.cu && ./x` works.
    """
    if not isinstance(spec, Spec):
        raise TypeError(f"render() takes a kgen spec (kgen.Matmul, kgen.Reduce, ...), got {type(spec).__name__}")
    template = environment().get_template(spec.template)
    context = {f: getattr(spec, f) for f in spec.to_dict() if f != "kernel"}
    context.update(
        spec=spec,
        spec_json=spec.to_json(),
        version=__version__,
        ctype=spec.ctype,
        standalone=standalone,
    )
    context.update(spec.template_context())
    return template.render(**context)


def emit(spec: Spec, path, standalone: bool = False) -> Path:
    """Write the rendered source to `path` (a file, or a folder to put `<family>_<key>.cu` in)."""
    path = Path(path)
    if path.is_dir():
        path = path / f"{spec.kernel}_{spec.key}{'_standalone' if standalone else ''}.cu"
    # Rendered first, then written beside the target and renamed over it: a failure
    # (a bad spec, a full disk) never leaves a half-written file over an existing one.
    text = render(spec, standalone=standalone)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path
