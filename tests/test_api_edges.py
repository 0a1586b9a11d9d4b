"""Edges of the public API that need no GPU: custom reductions through the dispatcher,
degenerate combine expressions, and emit's all-or-nothing write."""
from __future__ import annotations

import os

import numpy as np
import pytest

import kgen


def test_dispatch_points_custom_reductions_to_the_spec():
    with pytest.raises(kgen.ArrayError, match=r"kgen.Reduce\(op='custom'"):
        kgen.reduce(np.ones(4, np.float32), op="custom")


@pytest.mark.parametrize("combine", ["a", "b", "a + a", "1"])
def test_combine_must_use_both_operands(combine):
    with pytest.raises(ValueError, match="combine"):
        kgen.Reduce(op="custom", map_expr="x", combine=combine, identity="0")


def test_emit_failure_leaves_the_old_file_whole(tmp_path, monkeypatch):
    target = tmp_path / "k.cu"
    target.write_text("previous contents\n")

    def broken(fd, text):
        os.close(fd)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("kgen.core.render._write_text", broken)
    with pytest.raises(OSError):
        kgen.emit(kgen.Matmul(), target)
    monkeypatch.undo()
    assert target.read_text() == "previous contents\n"
    assert [p.name for p in tmp_path.iterdir()] == ["k.cu"]
