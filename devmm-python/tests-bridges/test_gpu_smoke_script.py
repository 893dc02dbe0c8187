"""scripts/gpu-smoke-bridges.py runs only on a GPU; here it is compiled,
imported (its checks import their frameworks only when run), and checked
to cover every bridge, and its dispatcher refuses unknown names."""

from __future__ import annotations

import importlib.util
import py_compile
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu-smoke-bridges.py"


def load():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("gpu_smoke_bridges", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_smoke_script_compiles_and_covers_every_bridge() -> None:
    py_compile.compile(str(SCRIPT), doraise=True)
    smoke = load()
    assert sorted(smoke.CHECKS) == ["cupy", "numba", "rmm", "torch"]
    assert all(callable(check) and check.__doc__ for check in smoke.CHECKS.values())
    assert smoke.main(["jax"]) == 2
