"""scripts/gpu-smoke-bridges.py runs its checks only on a GPU; here it is
compiled, imported (its checks import their frameworks only when run), and
checked to cover every bridge; its dispatcher refuses unknown names, and a
bridge whose framework is not installed is skipped, never an ImportError."""

from __future__ import annotations

import importlib.util
import json
import py_compile
from pathlib import Path

import pytest

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
    assert sorted(smoke.CHECKS) == sorted(smoke.FRAMEWORKS) == ["cupy", "numba", "rmm", "torch", "torch-pool"]
    assert smoke.FRAMEWORKS["torch-pool"] == "torch"
    assert all(callable(check) and check.__doc__ for check in smoke.CHECKS.values())
    assert smoke.main(["jax"]) == 2


def last_report(capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_a_bridge_whose_framework_is_missing_is_skipped(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    smoke = load()
    monkeypatch.setitem(smoke.CHECKS, "rmm", lambda: pytest.fail("the check of a missing framework ran"))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "rmm" else real(name, *a))
    assert smoke.main(["--one", "rmm"]) == 3
    assert last_report(capsys) == {"check": "bridge-rmm", "status": "skipped", "detail": "not installed: rmm"}


def test_a_rehearsal_runs_no_check(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    smoke = load()
    monkeypatch.setenv("DEVMM_SMOKE_REHEARSAL", "1")
    monkeypatch.setitem(smoke.CHECKS, "numba", lambda: pytest.fail("a rehearsal ran the check"))
    assert smoke.main(["--one", "numba"]) == 3
    report = last_report(capsys)
    assert report["status"] == "skipped" and report["detail"].startswith("hardware only: numba_cuda installed"), report


def test_a_failing_check_fails_with_its_error(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    smoke = load()

    def broken() -> None:
        raise ImportError("libcuda.so.1: cannot open shared object file")

    monkeypatch.setitem(smoke.CHECKS, "torch", broken)
    assert smoke.main(["--one", "torch"]) == 1
    assert last_report(capsys) == {
        "check": "bridge-torch",
        "status": "failed",
        "detail": "ImportError: libcuda.so.1: cannot open shared object file",
    }
