"""Compiling ahead: build the kernels kgen.matmul would launch for a list of products, so that
their first calls load cubins from the cache (KGEN_CACHE_DIR) instead of waiting for nvcc.

A first call of a new spec compiles what it launches: about a second a unit on a 16-CPU
host, several on a small one. A model's layers multiplied by a batch of any number of
tokens meet many specs (the tiles follow the rows: 21-32 specs for 1-256 rows against one
weight on an H200), so a server that sees a new token count pays that wait on a live request.
compile_ahead asks dispatch which spec each product runs (call_spec, for this GPU or a named
one, so a build machine without a GPU can fill the cache of the machines that will run),
and compiles each distinct spec once, whole, several nvcc runs at a time. A call loads a
whole module it finds in the cache as it is (kgen.core.kernel.build).
"""
from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import re
import time
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ..core.compiler import default_workers
from ..core.runtime import ArrayError
from ..core.spec import Spec
from .device import DeviceInfo, arch_limits
from .dispatch import STAND_IN_TYPES
from .pool import compile_reason

DTYPES = tuple(STAND_IN_TYPES)


@dataclasses.dataclass(frozen=True)
class Product:
    """One kgen.matmul(A, B) as the caller will make it: A of M x K (rows of a batch of tokens,
    folded), B of K x N; weight_t: B is W.t() of an N x K weight W (torch.nn.Linear's
    storage), else a row-major K x N matrix. Both contiguous, as layers hold them."""

    M: int
    N: int
    K: int
    dtype: str = "float32"
    weight_t: bool = True
    allow_tf32: bool = False

    def __post_init__(self) -> None:
        for name in ("M", "N", "K"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
                raise ValueError(f"Product {name}={v!r} is not allowed: a whole number of at least 1")
        if self.dtype not in DTYPES:
            raise ValueError(f"Product dtype={self.dtype!r} is not allowed: one of {list(DTYPES)}")

    def label(self) -> str:
        return (f"{self.dtype} {self.M}x{self.N}x{self.K} {'W.t()' if self.weight_t else 'row-major B'}"
                + (" allow_tf32" if self.allow_tf32 else ""))

    def stand_ins(self) -> tuple[np.ndarray, np.ndarray]:
        """numpy arrays of the call's shapes and strides that own no memory (every element is
        the same one), for dispatch.call_spec."""
        t = np.dtype(STAND_IN_TYPES[self.dtype])
        item = np.dtype(t).itemsize
        cell = np.zeros(1, t)
        A = np.lib.stride_tricks.as_strided(cell, (self.M, self.K), (self.K * item, item), writeable=False)
        strides_b = (item, self.K * item) if self.weight_t else (self.N * item, item)
        B = np.lib.stride_tricks.as_strided(cell, (self.K, self.N), strides_b, writeable=False)
        return A, B


def parse_rows(text: str) -> list[int]:
    """Row counts from "1-256", "1,2,4,8" or "1-16,32,64-128": sorted, each once."""
    rows: set[int] = set()
    for part in text.replace(" ", "").split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise ValueError(f"rows {text!r}: {part!r} is not a count or a range (e.g. 1-256 or 1,2,4-8)")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if lo < 1 or hi < lo:
            raise ValueError(f"rows {text!r}: {part!r} is not allowed (counts of at least 1, ranges low-high)")
        if hi - lo >= 1 << 16:
            raise ValueError(f"rows {text!r}: {part!r} spans more than 65536 counts")
        rows.update(range(lo, hi + 1))
    return sorted(rows)


def parse_sides(text: str, names: str) -> tuple[int, ...]:
    """Sides from "4096x11008" (names "NK": a weight's N x K) or "7x4096x4096" ("MNK")."""
    parts = text.lower().split("x")
    if len(parts) != len(names) or not all(p.isdigit() and int(p) >= 1 for p in parts):
        example = "4096x11008" if len(names) == 2 else "16x4096x4096"
        raise ValueError(f"{text!r} is not {'x'.join(names)} (positive whole numbers, e.g. {example})")
    return tuple(int(p) for p in parts)


def layer_products(weights: Iterable[tuple[int, ...]], rows: Iterable[int], dtypes: Sequence[str],
                   weight_t: bool = True, allow_tf32: bool = False) -> list[Product]:
    """Every product of `rows` rows against each weight (N x K): a model's layers against
    batches of those token counts, in each dtype."""
    rows = list(rows)
    return [Product(M, N, K, dtype, weight_t, allow_tf32) for dtype in dtypes for (N, K) in weights for M in rows]


def config_weights(config: dict[str, Any], lm_head: bool = True) -> list[tuple[int, int]]:
    """The N x K weights of a decoder's linear layers, from its config as Hugging Face
    transformers writes it (config.json: hidden_size, intermediate_size, num_attention_heads,
    and where given num_key_value_heads, head_dim, vocab_size): the attention's query, key,
    value and output projections, the MLP's gate, up and down projections, and the output head
    (lm_head, where vocab_size is given). Each once, in that order."""
    def size(key: str, default: int | None = None) -> int:
        value = config.get(key, default)
        if value is None:
            raise ValueError(f"the config has no {key!r}; a decoder's config names hidden_size, intermediate_size "
                             "and num_attention_heads (num_key_value_heads, head_dim and vocab_size if they differ "
                             "from the defaults)")
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"the config's {key!r} is {value!r}: a whole number of at least 1 is needed")
        return value

    hidden = size("hidden_size")
    heads = size("num_attention_heads")
    kv_heads = size("num_key_value_heads", heads)
    head_dim = size("head_dim", hidden // heads if hidden % heads == 0 else None)
    inter = size("intermediate_size")
    shapes = [(heads * head_dim, hidden), (kv_heads * head_dim, hidden), (hidden, heads * head_dim),
              (inter, hidden), (hidden, inter)]
    if lm_head and config.get("vocab_size") is not None:
        shapes.append((size("vocab_size"), hidden))
    return list(dict.fromkeys(shapes))


def stand_in_device(arch: str, name: str | None = None, multiprocessors: int | None = None) -> DeviceInfo:
    """A GPU of `arch` for a machine without one: the arch's limits (kgen.tune.device), with the
    model's name (which picks its shipped tables and tuned entries) and SM count where given."""
    from ..core.compiler import check_arch

    arch = check_arch(arch)
    limits = arch_limits(arch)
    if multiprocessors is not None:
        if multiprocessors < 1:
            raise ValueError(f"multiprocessors={multiprocessors} is not allowed: at least 1")
        limits["multiprocessors"] = multiprocessors
    return DeviceInfo(name or f"a {arch} GPU", arch, limits)


@dataclasses.dataclass
class AheadReport:
    """What compile_ahead did: the distinct specs the products run (companions included), how
    many the cache held already, how many it compiled, and those that failed, with why."""

    device: DeviceInfo
    products: int
    specs: list[Spec]
    cached: int = 0
    compiled: int = 0
    failed: list[tuple[Spec, str]] = dataclasses.field(default_factory=list)
    evicted: int = 0
    seconds: float = 0.0

    def summary(self) -> str:
        text = (f"{self.products} products on {self.device.name} ({self.device.arch}) run {len(self.specs)} "
                f"specs: {self.cached} in the cache already, {self.compiled} compiled now")
        if self.failed:
            text += f", {len(self.failed)} failed"
        text += f" ({self.seconds:.1f} s)"
        if self.evicted:
            text += (f"; {self.evicted} were removed again to keep the cache under its size limit: raise "
                     "KGEN_CACHE_MAX_MB")
        return text


def specs_for(products: Iterable[Product], device: DeviceInfo, db: Any = None) -> list[Spec]:
    """The distinct specs kgen.matmul runs for `products` on `device`, and the specs their
    kernels build at launch (Spec.companion_specs), in the order first met. `db`: the tuning
    database the calls will read (None: the default one, False: none)."""
    from . import dispatch

    seen: dict[str, Spec] = {}
    for p in products:
        A, B = p.stand_ins()
        try:
            spec = dispatch.call_spec(A, B, p.allow_tf32, device=device, db=db, dtype=p.dtype)
        except ArrayError as exc:
            raise ValueError(f"{p.label()}: {exc}") from None
        for s in (spec, *spec.companion_specs()):
            seen.setdefault(s.key, s)
    return list(seen.values())


def compile_ahead(products: Iterable[Product], *, device: DeviceInfo | None = None, workers: int | None = None,
                  db: Any = None, on_done: Callable[[Spec, str | None], None] | None = None,
                  dry_run: bool = False) -> AheadReport:
    """Compile every spec kgen.matmul runs for `products` on `device` (None: this GPU) that
    the disk cache does not hold, `workers` nvcc runs at a time (None: one fewer than the CPU
    count, at least one; 0: one after another in this thread). on_done(spec, why it failed or
    None) follows each compile, in this thread. dry_run: find the specs and what the cache
    holds, compile nothing.

    The compiles run in threads, each waiting on its nvcc process (rendering a spec takes a
    few milliseconds of the seconds nvcc takes), so no Python process is started: a script
    that calls this needs no `if __name__ == "__main__":` guard, nor a notebook any care."""
    from ..core import kernel as kernel_mod

    t0 = time.perf_counter()
    if device is None:
        from . import dispatch

        device = dispatch._this_device()
    products = list(products)
    specs = specs_for(products, device, db)
    report = AheadReport(device, len(products), specs)
    missing = [s for s in specs if not kernel_mod.is_compiled(s, device.arch, disk_only=True)]
    report.cached = len(specs) - len(missing)
    if missing and not dry_run:
        arch = device.arch

        def build(spec: Spec) -> str | None:
            try:
                kernel_mod.compile(spec, arch)
                return None
            except Exception as exc:  # noqa: BLE001 - every failure is this spec's, reported with it
                return compile_reason(exc)

        def finished(spec: Spec, why: str | None) -> None:
            if why is None:
                report.compiled += 1
            else:
                report.failed.append((spec, why))
            if on_done is not None:
                on_done(spec, why)

        n = _workers(workers, len(missing))
        if n == 0:
            for spec in missing:
                finished(spec, build(spec))
        else:
            with cf.ThreadPoolExecutor(max_workers=n, thread_name_prefix="kgen-ahead") as pool:
                futures = {pool.submit(build, spec): spec for spec in missing}
                for fut in cf.as_completed(futures):
                    finished(futures[fut], fut.result())
        # The cache removes its least recently used entries past KGEN_CACHE_MAX_MB: a fill larger
        # than that keeps only part of what it compiled.
        compiled = {s.key for s in missing} - {s.key for s, _ in report.failed}
        report.evicted = sum(1 for s in specs
                             if s.key in compiled and not kernel_mod.is_compiled(s, arch, disk_only=True))
    report.seconds = time.perf_counter() - t0
    return report


def _workers(asked: int | None, jobs: int) -> int:
    """Compile processes: as asked, else one fewer than the CPU count (at least one), and never
    more than there are specs to compile."""
    n = default_workers() if asked is None else asked
    return min(n, jobs) if n else 0
