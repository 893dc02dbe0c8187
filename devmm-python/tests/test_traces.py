"""TraceAdaptor from Python, and the `devmm` command the package installs
(console script and `python -m devmm`): replay, plot, and a PyTorch
snapshot read by PyTorch's own viewer."""

from __future__ import annotations

import errno
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import devmm
from devmm.mrs.cpu import MallocMemoryResource


def record(path: Path, fmt: str) -> int:
    """Runs a small workload through a TraceAdaptor; returns its peak."""
    stats = devmm.StatisticsAdaptor(MallocMemoryResource())
    traced = devmm.TraceAdaptor(stats, str(path), format=fmt, call_sites=16)
    live = []
    for i in range(60):
        live.append(devmm.DeviceBuffer(100 + i * 37, mr=traced))  # TRACED HERE
        if i % 3 == 2:
            live.pop(0)
    live.clear()
    traced.flush()
    return stats.peak_bytes


def devmm_command(*args: str) -> subprocess.CompletedProcess[str]:
    """Runs the console script `pip install` put next to this Python."""
    script = shutil.which("devmm", path=os.path.dirname(sys.executable))
    assert script is not None, "pip install ./devmm-python puts a devmm command on PATH"
    return subprocess.run([script, *args], capture_output=True, text=True)


def test_the_console_script_and_python_m_devmm_are_the_rust_cli() -> None:
    for command in (
        lambda *a: devmm_command(*a),
        lambda *a: subprocess.run([sys.executable, "-m", "devmm", *a], capture_output=True, text=True),
    ):
        out = command("--help")
        assert out.returncode == 0
        for sub in ("info", "check", "bench", "replay", "plot", "snapshot"):
            assert f"\n  {sub} " in out.stdout, out.stdout
        bad = command("frobnicate")
        assert bad.returncode == 2
        assert bad.stderr.startswith("devmm: error: unrecognized subcommand 'frobnicate'"), bad.stderr


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_python_trace_replays_with_its_peak(tmp_path: Path, fmt: str) -> None:
    trace = tmp_path / f"trace.{fmt}"
    peak = record(trace, fmt)
    first = trace.read_text().splitlines()[0]
    if fmt == "csv":
        assert first == "Thread,Time,Action,Pointer,Size,Stream"
    else:
        event = json.loads(first)
        assert event["device"] == "cpu:0" and event["frames"][0]["file"] == __file__
    out = devmm_command("replay", str(trace), "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert (report["recorded_peak_bytes"], report["peak_bytes"], report["events"]) == (peak, peak, 120)


def test_trace_adaptor_refuses_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match='unknown trace format "xml"'):
        devmm.TraceAdaptor(MallocMemoryResource(), str(tmp_path / "t"), format="xml")
    with pytest.raises(OSError, match="cannot create the trace file"):
        devmm.TraceAdaptor(MallocMemoryResource(), str(tmp_path / "missing" / "t.csv"))


def test_a_trace_file_that_cannot_be_written_is_an_os_error() -> None:
    # The file opens, its header cannot be written: the docstring's OSError,
    # with the operating system's number.
    with pytest.raises(OSError, match="cannot write the trace header") as raised:
        devmm.TraceAdaptor(MallocMemoryResource(), "/dev/full")
    assert raised.value.errno == errno.ENOSPC


def memory_viz() -> str:
    """PyTorch's own `torch/cuda/_memory_viz.py`, taken from the torch
    wheel by scripts/test-python.sh (pure Python; needs no CUDA)."""
    path = os.environ.get("DEVMM_TEST_TORCH_MEMORY_VIZ")
    assert path and os.path.isfile(path), (
        "set DEVMM_TEST_TORCH_MEMORY_VIZ to torch/cuda/_memory_viz.py from a torch wheel "
        "(scripts/test-python.sh extracts it)"
    )
    return path


def test_pytorchs_memory_viz_reads_our_snapshot(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    stats = devmm.StatisticsAdaptor(MallocMemoryResource())
    traced = devmm.TraceAdaptor(stats, str(trace), format="jsonl", call_sites=16)
    kept = [devmm.DeviceBuffer(1 << 20, mr=traced), devmm.DeviceBuffer(3 << 20, mr=traced)]
    freed = devmm.DeviceBuffer(512, mr=traced)
    del freed
    traced.flush()
    snapshot = tmp_path / "snapshot.pickle"
    out = devmm_command("snapshot", str(trace), "-o", str(snapshot))
    assert out.returncode == 0, out.stderr

    # The segment summary checks its own accounting (it raises on a mismatch).
    stats_out = subprocess.run(
        [sys.executable, memory_viz(), "stats", str(snapshot)], capture_output=True, text=True
    )
    assert stats_out.returncode == 0, stats_out.stderr
    assert "segments: 2" in stats_out.stdout
    assert "total_allocated: 4.0MiB" in stats_out.stdout
    # The trace printout replays the history: three allocations, and one
    # free as a request and its completion.
    trace_out = subprocess.run(
        [sys.executable, memory_viz(), "trace", str(snapshot)], capture_output=True, text=True
    )
    assert trace_out.returncode == 0, trace_out.stderr
    lines = trace_out.stdout.splitlines()
    assert lines[:2] == ["Device 0 ----------------", "5 entries"], lines
    # The live allocations are segments (numbered by address), the freed one is not.
    assert re.fullmatch(r"a = seg_[01]\[0:1\.0MiB\]", lines[2]), lines
    assert re.fullmatch(r"b = seg_[01]\[0:3\.0MiB\]", lines[3]), lines
    assert re.fullmatch(r"c = MEM\[\d+:512\.0B\]", lines[4]), lines
    assert lines[5:7] == ["del c # 512.0B", "# free completed for c 512.0B"]
    # And the HTML viewer page is made from it.
    page = tmp_path / "viz.html"
    plot = subprocess.run(
        [sys.executable, memory_viz(), "trace_plot", str(snapshot), "-o", str(page)],
        capture_output=True,
        text=True,
    )
    assert plot.returncode == 0, plot.stderr
    assert "snapshot.pickle" in page.read_text()

    # The tracking adaptor's state exports the same way.
    tracked = devmm.TrackingAdaptor(MallocMemoryResource())
    held = devmm.DeviceBuffer(2 << 20, mr=tracked)
    state = tmp_path / "state.pickle"
    state.write_bytes(tracked.torch_snapshot())
    state_out = subprocess.run(
        [sys.executable, memory_viz(), "stats", str(state)], capture_output=True, text=True
    )
    assert state_out.returncode == 0, state_out.stderr
    assert "total_allocated: 2.0MiB" in state_out.stdout
    assert pickle.loads(state.read_bytes())["segments"][0]["address"] == held.ptr
    del kept, held
