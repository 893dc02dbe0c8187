"""No import cycle in the Python package (issue 32): the graph of every
``import`` in ``devmm`` (function-local ones included, as a cycle a local
import hides is still a cycle at run time), with the packages a submodule
import initialises, has no strongly connected component larger than one
module; and each module imports first in a fresh interpreter."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import pytest

import devmm

PACKAGE = pathlib.Path(devmm.__file__).parent


def _modules() -> dict[str, tuple[pathlib.Path, bool]]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ["devmm", *path.relative_to(PACKAGE).with_suffix("").parts]
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = _modules()

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, (path, is_package) in modules.items():
        here = name if is_package else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = here
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                module = node.module or "" if not node.level else base + ("." + node.module if node.module else "")
                targets = [module, *(f"{module}.{alias.name}" for alias in node.names)]
            else:
                continue
            for target in filter(None, map(known, targets)):
                if target == name or name.startswith(target + "."):
                    continue  # the module itself, or a package it is in
                graph[name].add(target)
                # Importing a submodule runs its packages' __init__ first.
                parts = target.split(".")
                for i in range(1, len(parts)):
                    package = ".".join(parts[:i])
                    if package in modules and not (name == package or name.startswith(package + ".")):
                        graph[name].add(package)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_the_checker_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_package_has_no_import_cycle() -> None:
    graph = import_graph()
    # The edges it must see, a function-local import's and a package's among them.
    assert {"devmm.mrs._cupy", "devmm.mrs._rmm"} <= graph["devmm.mrs.cuda"]
    assert {"devmm.mrs._cupy", "devmm.mrs", "devmm._provided"} <= graph["devmm.integrations.cupy"]
    assert cycles(graph) == []


@pytest.mark.parametrize(
    "module",
    ["devmm.mrs._cupy", "devmm.mrs._rmm", "devmm.integrations.cupy", "devmm.integrations.rmm", "devmm._core.device", "devmm._runtimes"],
)
def test_each_module_imports_first(module: str) -> None:
    done = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
