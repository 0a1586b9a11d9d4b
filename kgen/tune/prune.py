"""Pruning on ptxas' report: a compiled candidate that spills, or whose registers would make
its launch fail or starve the SM of warps, is ruled out before it is launched.

(Pruning before compiling is the family's own prune_reason, against the device's limits.)
"""
from __future__ import annotations

from ..core.spec import Spec


def ptxas_reason(spec: Spec, resources: dict | None, limits: dict[str, int], min_warps: int = 4,
                 max_spill_bytes: int = 128) -> str | None:
    """Why ptxas' report rules a compiled candidate out, or None.

    Spills put accumulators in local memory: a candidate is out when an entry point spills
    more than `max_spill_bytes`, or when every entry point spills. (A few bytes spilled by
    one entry point are let through: a cubin can hold a fallback path, such as matmul's
    element-load kernel next to its vector-load one, that the problem never runs.)
    A block whose registers exceed the SM's cannot launch at all; one that leaves fewer
    than `min_warps` warps resident per SM cannot hide memory latency. The block size comes
    from the spec's `threads` or `block_size` (no occupancy check for a family with neither).
    """
    if not resources:
        return None
    spilling = {name: r for name, r in resources.items() if r.get("spill_stores", 0) or r.get("spill_loads", 0)}
    for name, r in sorted(spilling.items()):
        if (max(r.get("spill_stores", 0), r.get("spill_loads", 0)) > max_spill_bytes
                or len(spilling) == len(resources)):
            return (f"ptxas: {name} spills {r.get('spill_stores', 0)} bytes to local memory "
                    f"({r.get('registers', 0)} registers)")
    threads = getattr(spec, "threads", None) or getattr(spec, "block_size", None)
    if not isinstance(threads, int) or threads <= 0:
        return None
    per_sm = limits.get("registers_per_sm", 65536)
    per_block = limits.get("registers_per_block", per_sm)
    warps = -(-threads // 32)
    for name, r in sorted(resources.items()):
        regs = r.get("registers", 0)
        if not regs:
            continue
        # Registers are handed out per warp in chunks of 256.
        per_warp = -(-(regs * 32) // 256) * 256
        if per_warp * warps > per_block:
            return (f"ptxas: {name} needs {regs} registers x {threads} threads = {per_warp * warps} per block; "
                    f"the device allows {per_block} (the launch would fail)")
        blocks = per_sm // (per_warp * warps)
        if blocks * warps < min_warps:
            return (f"ptxas: {regs} registers per thread cap occupancy at {blocks * warps} warps per SM "
                    f"(below {min_warps})")
    return None

