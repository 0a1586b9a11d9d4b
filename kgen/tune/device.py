"""The device a tuning run is for: its name, arch and limits, probed from the GPU or taken
from a table (a dry run needs no GPU), and the toolchain version results are stored under."""
from __future__ import annotations

import dataclasses

# Limits of each architecture, for --dry-run without a GPU. With a GPU the tuner asks the
# device instead. Shared memory is the per-block opt-in maximum.
ARCH_LIMITS: dict[str, dict[str, int]] = {
    "sm_80": {"compute_capability": 80,
              "max_threads_per_block": 1024, "max_shared_per_block_optin": 166912, "registers_per_sm": 65536,
              "registers_per_block": 65536, "max_threads_per_sm": 2048, "multiprocessors": 108,
              "l2_bytes": 40 << 20},
    "sm_86": {"compute_capability": 86,
              "max_threads_per_block": 1024, "max_shared_per_block_optin": 101376, "registers_per_sm": 65536,
              "registers_per_block": 65536, "max_threads_per_sm": 1536, "multiprocessors": 84,
              "l2_bytes": 6 << 20},
    "sm_89": {"compute_capability": 89,
              "max_threads_per_block": 1024, "max_shared_per_block_optin": 101376, "registers_per_sm": 65536,
              "registers_per_block": 65536, "max_threads_per_sm": 1536, "multiprocessors": 128,
              "l2_bytes": 72 << 20},
    "sm_90": {"compute_capability": 90,
              "max_threads_per_block": 1024, "max_shared_per_block_optin": 232448, "registers_per_sm": 65536,
              "registers_per_block": 65536, "max_threads_per_sm": 2048, "multiprocessors": 132,
              "l2_bytes": 50 << 20},
    "sm_100": {"compute_capability": 100,
              "max_threads_per_block": 1024, "max_shared_per_block_optin": 232448, "registers_per_sm": 65536,
               "registers_per_block": 65536, "max_threads_per_sm": 2048, "multiprocessors": 148,
               "l2_bytes": 126 << 20},
}


@dataclasses.dataclass(frozen=True)
class DeviceInfo:
    """A device as the tuner and dispatch see it. `limits` has the keys of
    kgen.core.runtime.device_limits() plus compute_capability (90 for sm_90),
    registers_per_sm, registers_per_block and max_threads_per_sm (a family's prune_reason
    and the ptxas check read them)."""

    name: str
    arch: str
    limits: dict[str, int]


def arch_limits(arch: str) -> dict[str, int]:
    """Device limits for `arch` without a GPU (sm_90's for an architecture not in the table)."""
    base = arch.rstrip("af")
    return dict(ARCH_LIMITS.get(base, ARCH_LIMITS["sm_90"]))


def cuda_device_info() -> DeviceInfo:
    """Name, arch and limits of the GPU. Makes no context current (creating one costs a few
    hundred milliseconds, too much for a tuning-database hit or a dispatch lookup)."""
    from ..core import runtime

    dev = runtime.device()
    import pycuda.driver as drv

    a = drv.device_attribute
    limits = dict(runtime.device_limits())
    limits.update(registers_per_sm=dev.get_attribute(a.MAX_REGISTERS_PER_MULTIPROCESSOR),
                  registers_per_block=dev.get_attribute(a.MAX_REGISTERS_PER_BLOCK),
                  max_threads_per_sm=dev.get_attribute(a.MAX_THREADS_PER_MULTIPROCESSOR))
    return DeviceInfo(dev.name(), runtime.device_arch(), limits)


def toolchain_version() -> str:
    """nvcc's version string ("no nvcc" without one): part of every tuning result's key."""
    from ..core.compiler import ToolchainError, nvcc_version

    try:
        return nvcc_version()
    except ToolchainError:
        return "no nvcc"
