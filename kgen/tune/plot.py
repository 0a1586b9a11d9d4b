"""Plot a tuning run: each timed candidate's median against each spec field that varies.

Needs matplotlib (the `plot` extra: pip install 'kgen[plot]'); the file format follows the
file name's suffix (.png, .svg, .pdf, ...).
"""
from __future__ import annotations

import json
from typing import Any, Iterable

from .records import Record, TuneError

PLOT_INSTALL_HINT = "pip install 'kgen[plot]'"


def plot_records(records: Iterable[dict[str, Any] | Record], path: str, title: str = "") -> str:
    """Scatter each timed candidate's median against each varying spec field, one panel
    per field, the winner as a red star. `records` are Records or their to_dict() rows
    (as in `kgen tune --json` output). Returns `path`."""
    rows = []
    for r in records:
        d = r.to_dict() if isinstance(r, Record) else r
        if d.get("status") == "ok" and d.get("median_ms"):
            spec = d["spec"] if isinstance(d["spec"], dict) else json.loads(d["spec"])
            rows.append((spec, float(d["median_ms"])))
    if not rows:
        raise TuneError("nothing to plot: no candidate was timed")
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: never open a window or need a display
        import matplotlib.pyplot as plt
        import numpy as np
    except ImportError:
        raise TuneError(f"writing the plot {path} needs matplotlib: {PLOT_INSTALL_HINT}") from None
    fields = [k for k in rows[0][0] if k != "kernel" and len({json.dumps(s.get(k)) for s, _ in rows}) > 1]
    fields = fields or ["kernel"]
    best = min(t for _, t in rows)
    cols = min(3, len(fields))
    nrows = -(-len(fields) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.2 * nrows), squeeze=False)
    jitter = np.random.default_rng(0)  # spreads equal x values apart; seeded so a plot is reproducible
    for ax, field in zip(axes.ravel(), fields):
        labels = sorted({_label(s.get(field)) for s, _ in rows}, key=_label_order)
        pos = {lab: i for i, lab in enumerate(labels)}
        xs = np.array([pos[_label(s.get(field))] for s, _ in rows], dtype=float)
        xs += jitter.uniform(-0.18, 0.18, len(rows))
        ys = np.array([t for _, t in rows])
        win = ys == best
        ax.scatter(xs[~win], ys[~win], s=12, alpha=0.6, color="tab:blue")
        ax.scatter(xs[win], ys[win], s=50, color="tab:red", marker="*", label="winner")
        ax.set_yscale("log")
        ax.set_xticks(range(len(labels)))
        crowded = len(labels) > 10
        rotation = 90 if crowded else (30 if max(len(lab) for lab in labels) > 4 else 0)
        ax.set_xticklabels(labels, rotation=rotation, fontsize=6 if crowded else 8)
        ax.set_title(field, fontsize=10)
        ax.set_ylabel("median ms")
        ax.grid(True, axis="y", alpha=0.3)
    for ax in axes.ravel()[len(fields):]:
        ax.axis("off")
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except ValueError as exc:  # an unknown suffix
        raise TuneError(f"cannot write the plot {path}: {exc}") from None
    finally:
        plt.close(fig)
    return path


def _label(v: Any) -> str:
    if isinstance(v, (list, tuple)):
        return "x".join(str(x) for x in v)
    return str(v)


def _label_order(lab: str) -> tuple[int, tuple[int, ...], str]:
    """Numeric labels (128, 128x64) in numeric order, then the others alphabetically."""
    parts = lab.split("x")
    if all(p.lstrip("-").isdigit() for p in parts):
        return (0, tuple(int(p) for p in parts), "")
    return (1, (), lab)
