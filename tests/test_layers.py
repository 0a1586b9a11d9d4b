"""kgen's layers import one way: cli -> bench -> tune -> ops -> core.

Two checks: each package's modules import in a fresh interpreter with every layer above
it blocked (module-level imports), and no import statement anywhere in a module, inside
functions too, names a higher layer (read from the source, relative imports resolved).
`import kgen` itself must stay light: it loads neither numpy, jinja2 nor pycuda.
"""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import kgen

PACKAGE_DIR = Path(kgen.__file__).resolve().parent
# Lowest first. The CLI is the outermost layer: it has a command for the benchmarks too.
LAYERS = ("core", "ops", "tune", "bench", "cli")
RANK = {name: i for i, name in enumerate(LAYERS)}

_IMPORT_ALL = r"""
import importlib, pkgutil, sys

package, blocked = sys.argv[1], tuple(p for p in sys.argv[2].split(",") if p)


class BlockHigherLayers:
    def find_spec(self, name, path=None, target=None):
        for prefix in blocked:
            if name == prefix or name.startswith(prefix + "."):
                raise ImportError(f"{name} is in a layer above {package}")
        return None


sys.meta_path.insert(0, BlockHigherLayers())
pkg = importlib.import_module(package)
names = [package] + [m.name for m in pkgutil.walk_packages(pkg.__path__, package + ".")]
for name in names:
    importlib.import_module(name)
print(",".join(names))
"""


@pytest.mark.parametrize("layer", LAYERS)
def test_each_package_imports_with_the_layers_above_it_blocked(layer):
    above = [f"kgen.{name}" for name in LAYERS[RANK[layer] + 1:]]
    modules = {f"kgen.{layer}.{p.stem}" for p in (PACKAGE_DIR / layer).glob("*.py") if p.name != "__init__.py"}
    proc = subprocess.run([sys.executable, "-c", _IMPORT_ALL, f"kgen.{layer}", ",".join(above)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    imported = set(proc.stdout.strip().split(","))
    assert modules <= imported, f"not imported: {sorted(modules - imported)}"


def _modules() -> dict[str, Path]:
    """Every module of the kgen package by dotted name (kgen/__init__.py, the lazy public
    API, names every layer by design and is left out)."""
    out = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        rel = path.relative_to(PACKAGE_DIR.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        name = ".".join(parts)
        if name != "kgen":
            out[name] = path
    return out


def _layer_of(module: str) -> str | None:
    """The layer a kgen module belongs to (kgen.__main__ runs the CLI)."""
    parts = module.split(".")
    if parts[0] != "kgen":
        return None
    if len(parts) == 1:
        return None
    if parts[1] == "__main__":
        return "cli"
    return parts[1] if parts[1] in RANK else None


def _api_top_layer() -> str:
    """The highest layer the public API (`import kgen`, then kgen.<name>) reaches."""
    return max((_layer_of(m) for m in kgen._API.values()), key=lambda layer: RANK[layer or "core"]) or "core"


def _imported(module: str, path: Path, known: set[str]) -> list[tuple[int, str]]:
    """(line, kgen module or "kgen" for the public API) of every import in the file:
    import statements at any depth, and importlib.import_module("kgen...") calls."""
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                if sub in known:
                    found.append((node.lineno, sub))  # from kgen import ops: the subpackage
                elif source == "kgen" and alias.name in kgen._API:
                    found.append((node.lineno, kgen._API[alias.name]))
                elif source == "kgen" and alias.name == "__version__":
                    continue  # the version string, defined in kgen/__init__ itself
                else:
                    found.append((node.lineno, source))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            arg = node.args[0].value
            if name == "import_module" and isinstance(arg, str) and arg.startswith("kgen"):
                found.append((node.lineno, arg))
    return [(line, target) for line, target in found if target == "kgen" or target.startswith("kgen.")]


def test_no_module_imports_a_higher_layer_even_inside_functions():
    modules = _modules()
    known = set(modules)
    api_layer = _api_top_layer()
    violations = []
    for module, path in modules.items():
        layer = _layer_of(module)
        assert layer is not None, f"{module} belongs to no layer: put it in one of {LAYERS}"
        for line, target in _imported(module, path, known):
            target_layer = api_layer if target == "kgen" else _layer_of(target)
            if target_layer is not None and RANK[target_layer] > RANK[layer]:
                violations.append(f"{path.relative_to(PACKAGE_DIR.parent)}:{line}: {module} ({layer}) imports "
                                  f"{target} ({target_layer})")
    assert not violations, "imports against the layers (" + " -> ".join(reversed(LAYERS)) + "):\n" + \
        "\n".join(violations)


def test_no_import_cycles_even_through_function_level_imports():
    """An import inside a function to dodge a cycle is still a cycle: two modules that need
    each other belong together, or a third module holds what both need."""
    modules = _modules()
    known = set(modules)
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for _, target in _imported(module, path, known):
            while target not in known and "." in target:
                target = target.rpartition(".")[0]  # kgen.core.spec.family -> kgen.core.spec
            if target in known and target != module:
                graph[module].add(target)
    cycles = []
    for start in sorted(graph):
        # Depth-first search for a path from `start` back to itself through larger names
        # only, so each cycle is reported once, from its smallest module.
        stack = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in sorted(graph[node]):
                if nxt == start:
                    cycles.append(" -> ".join(path + [start]))
                elif nxt > start and nxt not in path:
                    stack.append((nxt, path + [nxt]))
    assert not cycles, "import cycles:\n" + "\n".join(sorted(set(cycles)))


def test_the_scan_sees_function_level_and_relative_imports(tmp_path):
    """The checker itself: a relative import inside a function, a `from .. import` of a
    subpackage and an import_module call are all resolved to the module they name."""
    src = tmp_path / "spec.py"
    src.write_text("from .. import __version__\nfrom .. import ops\n\ndef f():\n    from ..tune.db import open_db\n"
                   "    import importlib\n    importlib.import_module('kgen.cli.main')\n")
    got = _imported("kgen.core.spec", src, {"kgen.ops", "kgen.tune.db", "kgen.cli.main"})
    assert got == [(2, "kgen.ops"), (5, "kgen.tune.db"), (7, "kgen.cli.main")]


def test_import_kgen_loads_no_heavy_dependency():
    code = ("import sys, json, kgen; kgen.__version__; "
            "print(json.dumps(sorted(m for m in ('numpy', 'jinja2', 'pycuda') if m in sys.modules)))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []
