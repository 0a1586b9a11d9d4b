"""The barrier protocol of the wgmma kernel's two-block clusters, replayed on a model.

Each block's producer fills stage f % STAGES with its own A tile and half of the shared B
tile, the half written into both blocks (TMA multicast), after waiting on its own "empty"
barrier; each consumer warp waits on its block's "full" barrier, reads the stage, and frees
the previous stage (and, after the last, that one) with one arrival on the empty barrier of
every block of the cluster. The model runs these steps, and the copies' deliveries, in
random orders under mbarrier semantics (arrivals, transaction bytes, phases, parity waits)
and checks that no copy overwrites a stage a consumer of that block may still read, that a
consumer sees exactly the fill it waited for, and that nothing deadlocks. A check on the
rendered source ties the model's formulas to the template's.
"""
from __future__ import annotations

import random

import pytest

import kgen
from kgen.ops.tensorcore import TensorMatmul

A_BYTES, B_BYTES = 4, 8   # any sizes: only the sums matter
WAIT = object()           # what a process yields when a barrier holds it


class Barrier:
    """An mbarrier: `count` arrivals and the expected transaction bytes complete a phase."""

    def __init__(self, count: int):
        self.count, self.pending, self.tx, self.phase = count, count, 0, 0

    def _advance(self):
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending, self.tx = self.count, 0

    def arrive(self, expect: int = 0):
        assert self.pending > 0, "more arrivals than the barrier counts in one phase"
        self.tx += expect
        self.pending -= 1
        self._advance()

    def complete_tx(self, nbytes: int):
        self.tx -= nbytes
        self._advance()

    def passed(self, parity: int) -> bool:
        """try_wait.parity: the phase of this parity has completed."""
        return (self.phase & 1) != parity


def run_cluster(stages: int, ntiles: int, consumers: int, rng: random.Random) -> None:
    blocks = 2
    full = [[Barrier(1) for _ in range(stages)] for _ in range(blocks)]
    empty = [[Barrier(consumers * blocks) for _ in range(stages)] for _ in range(blocks)]
    # What each block's stage holds: the fill number of its A and of each B half.
    held = [[{"A": None, "B0": None, "B1": None} for _ in range(stages)] for _ in range(blocks)]
    # Fills each consumer warp still reads (waited for and not yet freed).
    reading = [[set() for _ in range(consumers)] for _ in range(blocks)]
    copies = []   # (block written, stage, part, fill, barrier block) in flight

    def producer(r):
        for f in range(ntiles):
            s = f % stages
            while not empty[r][s].passed(((f // stages) & 1) ^ 1):
                yield WAIT
            full[r][s].arrive(A_BYTES + B_BYTES)
            copies.append((r, s, "A", f, r))
            for c in range(blocks):
                copies.append((c, s, f"B{r}", f, c))
            yield

    def consumer(r, w):
        for it in range(ntiles):
            s = it % stages
            while not full[r][s].passed((it // stages) & 1):
                yield WAIT
            assert held[r][s] == {"A": it, "B0": it, "B1": it}, (r, w, it, held[r][s])
            reading[r][w].add(it)
            yield
            if it > 0:
                reading[r][w].discard(it - 1)
                for c in range(blocks):
                    empty[c][(it - 1) % stages].arrive()
            yield
        if ntiles:
            reading[r][w].discard(ntiles - 1)
            for c in range(blocks):
                empty[c][(ntiles - 1) % stages].arrive()

    def deliver():
        c, s, part, f, b = copies.pop(rng.randrange(len(copies)))
        # The stage's previous fill (f - stages) must be free in block c: no consumer reads it.
        for w in range(consumers):
            assert f - stages not in reading[c][w], f"fill {f} overwrote stage {s} of block {c} while read"
        held[c][s][part] = f
        full[b][s].complete_tx(A_BYTES if part == "A" else B_BYTES // 2)

    procs = [producer(r) for r in range(blocks)] + [consumer(r, w) for r in range(blocks) for w in range(consumers)]
    live = list(procs)
    idle = 0   # steps in a row in which the chosen process could only wait
    while live or copies:
        if copies and (not live or rng.random() < 0.3):
            deliver()
            idle = 0
            continue
        p = rng.choice(live)
        try:
            idle = idle + 1 if next(p) is WAIT else 0
        except StopIteration:
            live.remove(p)
            idle = 0
        # With no copy in flight, waiting processes can only be woken by each other.
        assert copies or not live or idle < 200 * len(live), "deadlock: every process waits on a barrier"


@pytest.mark.parametrize("stages", [2, 3, 4, 6])
@pytest.mark.parametrize("ntiles", [0, 1, 2, 5, 13])
def test_cluster_stage_ring_never_overwrites_a_stage_in_use_nor_deadlocks(stages, ntiles):
    rng = random.Random(stages * 100 + ntiles)
    for _ in range(60):
        run_cluster(stages, ntiles, consumers=rng.choice([4, 8]), rng=rng)


def test_the_template_follows_the_modelled_protocol():
    src = kgen.render(TensorMatmul(dtype="bfloat16", tile=(128, 256, 64), warp_tile=(64, 256), stages=4,
                                   instruction="wgmma", cluster=2))
    # Empty barriers count every consumer warp of both blocks; the producer waits for the
    # previous round's phase; consumers free stages in every block of the cluster.
    assert "mbar_init(bars + 8 * (STAGES + s), 4 * CONSUMERS * CLUSTER)" in src
    assert "mbar_wait(bars + 8 * (STAGES + s), ((f / STAGES) & 1) ^ 1)" in src
    assert "mbar_expect_tx(full, STAGE_BYTES)" in src
    assert "mbar_wait(bars + 8 * s, (f / STAGES) & 1)" in src
    assert src.count("for (unsigned c = 0; c < CLUSTER; ++c) mbar_arrive_remote(") == 2
    assert ".multicast::cluster" in src and src.count("tma_load_multicast(sb") == 1
