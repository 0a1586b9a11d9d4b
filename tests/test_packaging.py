"""A non-editable install ships the templates inside the package and renders from them."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_ships_templates_and_renders_without_the_checkout(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                           "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"building the wheel failed:\n{proc.stderr}")
    wheel = next(tmp_path.glob("kgen-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    shipped = {Path(n).name for n in names if n.startswith("kgen/templates/")}
    assert {p.name for p in (ROOT / "templates").glob("*.j2")} <= shipped
    assert "kgen/py.typed" in names  # PEP 561: users' type checkers read kgen's hints
    target = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(target)
    code = "import kgen, sys; sys.stdout.write(kgen.render(kgen.Reduce()))"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    assert "kgen_reduce" in out.stdout
