"""Tuning: the autotuner (tuner), its parts (records, device, runners, pool, prune, stats,
model, plot), the tuning database (db) and tuned dispatch (dispatch).

Importing this package imports kgen.ops, so every kgen family is registered and a spec
read back from the database or a compile worker resolves to its class.
"""
from .. import ops as _ops  # noqa: F401
