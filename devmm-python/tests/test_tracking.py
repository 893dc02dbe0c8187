"""TrackingAdaptor from Python: live allocations with the Python call site,
reports grouped by site, DEVMM_LEAK_REPORT at exit, PyTorch snapshots."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import devmm
from devmm.mrs.cpu import MallocMemoryResource


def line_of(marker: str) -> int:
    """The line of this file that ends with ``marker``."""
    lines = Path(__file__).read_text().splitlines()
    return next(i for i, line in enumerate(lines, start=1) if line.endswith(marker))


def allocate_here(mr: devmm.TrackingAdaptor, n: int) -> devmm.DeviceBuffer:
    return devmm.DeviceBuffer(n, mr=mr)  # PY LEAK SITE


def test_the_report_names_the_python_file_and_line() -> None:
    mr = devmm.TrackingAdaptor(MallocMemoryResource())
    kept = []
    for _ in range(3):
        kept.append(allocate_here(mr, 100))
    big = devmm.empty((1000,), "uint8", layout=devmm.RowMajor(), mr=mr)  # PY OTHER SITE
    freed = allocate_here(mr, 7)
    del freed

    assert mr.live_bytes == 1300
    leaks = mr.leaks()
    assert sorted(leak.nbytes for leak in leaks) == [100, 100, 100, 1000]
    file, line, function = leaks[0].frames[0]
    assert (file, line, function) == (__file__, line_of("# PY LEAK SITE"), "allocate_here")
    assert leaks[0].frames[1][2] == "test_the_report_names_the_python_file_and_line"
    assert leaks[0].thread_name == "MainThread" or leaks[0].thread_name is None

    report = mr.report()
    first, second = [line for line in report.splitlines() if " bytes in " in line]
    assert first == f"  1000 bytes in 1 allocation at {__file__}:{line_of('# PY OTHER SITE')} in test_the_report_names_the_python_file_and_line"
    assert second == f"  300 bytes in 3 allocations at {__file__}:{line_of('# PY LEAK SITE')} in allocate_here"
    assert report.startswith("devmm leak report: 4 live allocations (1300 bytes) on cpu:0 through TrackingAdaptor -> ")
    del kept, big
    assert mr.leaks() == [] and mr.live_bytes == 0


def test_devmm_leak_report_prints_at_exit(tmp_path: Path) -> None:
    script = tmp_path / "leaky.py"
    script.write_text(
        textwrap.dedent(
            """\
            import devmm
            from devmm.mrs.cpu import MallocMemoryResource
            tracked = devmm.TrackingAdaptor(MallocMemoryResource())
            kept = devmm.DeviceBuffer(4096, mr=tracked)
            """
        )
    )
    env = dict(os.environ, DEVMM_LEAK_REPORT="1")
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, check=True)
    assert f"4096 bytes in 1 allocation at {script}:4 in <module>" in out.stderr, out.stderr
    env.pop("DEVMM_LEAK_REPORT")
    quiet = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, check=True)
    assert "leak report" not in quiet.stderr


def test_imports_still_held_at_exit_are_reported_as_foreign(tmp_path: Path) -> None:
    script = tmp_path / "holds_an_import.py"
    script.write_text(
        textwrap.dedent(
            """\
            import numpy as np
            import devmm
            source = np.zeros(100, dtype=np.float64)
            imported = devmm.from_dlpack(source)
            """
        )
    )
    env = dict(os.environ, DEVMM_LEAK_REPORT="1")
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, check=True)
    assert "devmm leak report: 1 foreign buffer (800 bytes) still held" in out.stderr, out.stderr
    env.pop("DEVMM_LEAK_REPORT")
    quiet = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, check=True)
    assert "leak report" not in quiet.stderr


def test_the_torch_snapshot_is_a_pickle_of_the_live_allocations() -> None:
    mr = devmm.TrackingAdaptor(MallocMemoryResource())
    kept = allocate_here(mr, 256)
    snapshot = pickle.loads(mr.torch_snapshot())
    (segment,) = snapshot["segments"]
    assert (segment["total_size"], segment["device"], segment["address"]) == (256, 0, kept.ptr)
    (block,) = segment["blocks"]
    assert block["state"] == "active_allocated"
    assert block["frames"][0] == {"filename": __file__, "line": line_of("# PY LEAK SITE"), "name": "allocate_here"}


def test_live_allocations_are_frozen_dataclasses() -> None:
    import dataclasses

    mr = devmm.TrackingAdaptor(MallocMemoryResource())
    kept = allocate_here(mr, 100)
    (leak,) = mr.leaks()
    assert isinstance(leak, devmm.LiveAllocation) and dataclasses.is_dataclass(leak)
    fields = dataclasses.asdict(leak)
    assert (fields["ptr"], fields["nbytes"], fields["stream"]) == (kept.ptr, 100, 0)
    assert fields["frames"][0][2] == "allocate_here" and isinstance(fields["time"], float)
    with pytest.raises(dataclasses.FrozenInstanceError):
        leak.nbytes = 1  # type: ignore[misc]
    assert leak == mr.leaks()[0]
    assert repr(leak).startswith(f"LiveAllocation(ptr={kept.ptr}, nbytes=100, stream=0, ")
