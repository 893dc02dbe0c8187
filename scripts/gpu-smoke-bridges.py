#!/usr/bin/env python3
"""The framework bridges on real hardware: one check per bridge, each in a
process of its own (PyTorch and Numba keep an allocator for life).

    python scripts/gpu-smoke-bridges.py            # every bridge
    python scripts/gpu-smoke-bridges.py torch rmm  # some
    python scripts/gpu-smoke-bridges.py --one numba  # one, here (what the smoke runs)

``torch-pool`` is PyTorch again, in a process of its own: a
``torch.cuda.use_mem_pool`` block over devmm after PyTorch started CUDA.

Needs a CUDA GPU and the devmm wheel; scripts/gpu-smoke.sh runs each bridge
as a step of its own (``bridge-NAME``). A bridge whose framework (of
scripts/requirements-bridges.txt) is not installed is skipped, with "not
installed: NAME"; one that is installed but fails to import fails. Prints
one ``PASS``, ``SKIP`` or ``FAIL name`` line per bridge (a failure's
traceback above it) and exits 1 when any failed. ``--one`` prints a JSON
line {"check", "status", "detail"} and exits 0, 1 or 3 (skipped). With
DEVMM_SMOKE_REHEARSAL=1 (the smoke's rehearsal over the fake runtime) a
check only says whether its framework is installed: the frameworks need a
real driver. The test suite imports this file and checks that every
bridge has a check."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import traceback
from collections.abc import Callable

MIB = 1 << 20


def check_torch() -> None:
    """PyTorch allocates through devmm; its statistics match devmm's, and a
    failed allocation is an exception, not a tensor over NULL."""
    import torch

    import devmm
    import devmm.integrations.torch as bridge
    from devmm.mrs.cuda import CudaRuntimeMemoryResource

    counted = devmm.StatisticsAdaptor(
        devmm.LimitingAdaptor(CudaRuntimeMemoryResource(), limit_bytes=512 * MIB)
    )
    bridge.install(counted)
    x = torch.ones(MIB, device="cuda")  # 4 MiB
    y = (x * 3).sum()
    assert float(y) == 3 * MIB, y
    stats = bridge.memory_stats(0)
    assert counted.current_bytes >= 4 * MIB, counted.current_bytes
    assert stats["allocated_bytes.all.current"] == counted.current_bytes, stats
    assert stats["allocated_bytes.all.peak"] <= counted.peak_bytes, stats
    del x, y
    torch.cuda.synchronize()
    assert bridge.memory_stats(0)["allocated_bytes.all.current"] == counted.current_bytes
    bridge.reset_peak_memory_stats(0)
    assert bridge.memory_stats(0)["allocated_bytes.all.peak"] == counted.current_bytes
    try:
        torch.empty(1024 * MIB, dtype=torch.uint8, device="cuda")
    except RuntimeError as e:  # std::bad_alloc through PyTorch's hook (ADR 0015)
        assert "bad_alloc" in str(e), e
    else:
        raise AssertionError("an allocation past the limit must raise")
    assert bridge.memory_stats(0)["num_ooms"] == 1
    z = torch.zeros(16, device="cuda")  # the context survived the failure
    assert int(z.sum()) == 0


def check_torch_pool() -> None:
    """A use_mem_pool block over devmm, after PyTorch started CUDA: its
    tensors come from devmm, and freed after the block they go back
    through devmm (issue 30)."""
    import torch

    import devmm
    import devmm.integrations.torch as bridge
    from devmm.mrs.cuda import CudaRuntimeMemoryResource

    outside = torch.ones(16, device="cuda")  # PyTorch's own allocator, CUDA started
    counted = devmm.StatisticsAdaptor(CudaRuntimeMemoryResource())
    pool = bridge.mem_pool(counted)
    with torch.cuda.use_mem_pool(pool):
        x = torch.full((16 * MIB,), 2.0, device="cuda")  # 64 MiB
    made = counted.allocations
    assert made >= 1 and counted.current_bytes >= 64 * MIB, counted
    y = torch.ones(MIB, device="cuda")  # after the block: PyTorch's allocator again
    assert counted.allocations == made, counted
    assert float((x * y[0]).sum()) == 32.0 * MIB
    del x
    del pool
    torch.cuda.synchronize()
    torch.cuda.empty_cache()  # the pool's cached segments go back to its allocator
    assert counted.current_bytes == 0, counted
    assert counted.deallocations == counted.allocations, counted
    assert float(outside.sum()) == 16.0 and float(y.sum()) == float(MIB)


def check_cupy() -> None:
    """CuPy kernels write devmm memory, both ways."""
    import cupy

    import devmm
    import devmm.integrations.cupy as bridge
    from devmm.mrs.cuda import CudaRuntimeMemoryResource, CupyAllocatorMemoryResource

    counted = devmm.StatisticsAdaptor(CudaRuntimeMemoryResource())
    with bridge.install(counted):
        a = cupy.arange(1000, dtype=cupy.float32) * 2
        assert counted.current_bytes >= 4000, counted.current_bytes
        assert float(a.sum()) == 999000.0
        del a
    # CuPy's pool as a devmm resource: a CuPy kernel fills a devmm tensor.
    gpu = devmm.Device.from_string("cuda:0")
    t = devmm.empty((256,), "float32", device=gpu, mr=CupyAllocatorMemoryResource())
    view = cupy.from_dlpack(t)
    view[...] = 7
    cupy.cuda.runtime.deviceSynchronize()
    raw = bytes(t.buffer.copy_to_host(nbytes=8))
    assert raw == b"\x00\x00\xe0\x40" * 2, raw
    t.buffer.free()


def check_numba() -> None:
    """A Numba kernel writes memory Numba took from devmm; pinned arrays
    are devmm's pinned memory (issue 29 #2); IPC of stream-ordered memory
    is refused and of cudaMalloc memory served (issue 29 #3)."""
    import devmm
    import devmm.integrations.numba as bridge
    from devmm.mrs.cuda import CudaRuntimeMemoryResource

    counted = devmm.StatisticsAdaptor(CudaRuntimeMemoryResource())
    with devmm.using_memory_resource(counted):
        bridge.install()  # before Numba makes its context
        import numpy as np
        from numba import cuda

        @cuda.jit
        def fill(out, value):  # type: ignore[no-untyped-def]
            i = cuda.grid(1)
            if i < out.size:
                out[i] = value

        out = cuda.device_array(1024, dtype=np.float32)
        assert counted.allocations >= 1 and counted.current_bytes >= 4096, counted
        fill[4, 256](out, 5.0)
        assert (out.copy_to_host() == 5.0).all()
        info = cuda.current_context().get_memory_info()
        assert 0 < info.free <= info.total

        # NumPy views devmm's pinned memory (a crash before the fix).
        pinned = cuda.pinned_array(1024, dtype=np.float32)
        out.copy_to_host(pinned)
        assert (pinned == 5.0).all()

        if counted.stream_ordered:  # cudaMallocAsync: cuIpcGetMemHandle cannot share it
            try:
                out.get_ipc_handle()
            except ValueError as e:
                assert "cudaMallocAsync" in str(e), e
            else:
                raise AssertionError("get_ipc_handle on cudaMallocAsync memory must be refused")
    with devmm.using_memory_resource(CudaRuntimeMemoryResource(async_alloc=False)):
        shared = cuda.device_array(256, dtype=np.float32)
        handle = shared.get_ipc_handle()  # devmm's cudaIpcGetMemHandle, in Numba's IpcHandle
        assert handle is not None


def check_rmm() -> None:
    """rmm's DeviceBuffer through devmm, and rmm's resource under devmm."""
    import rmm

    import devmm
    import devmm.integrations.rmm as bridge
    from devmm.mrs.cuda import CudaRuntimeMemoryResource, RmmMemoryResource

    counted = devmm.StatisticsAdaptor(CudaRuntimeMemoryResource())
    with bridge.install(counted):
        buffer = rmm.DeviceBuffer.to_device(b"devmm under rmm")
        assert counted.current_bytes == 15, counted.current_bytes
        assert buffer.copy_to_host().tobytes() == b"devmm under rmm"
        del buffer
        assert counted.current_bytes == 0
    gpu = devmm.Device.from_string("cuda:0")
    mr = RmmMemoryResource(rmm.mr.CudaMemoryResource(), gpu)
    t = devmm.empty((64,), "uint8", device=gpu, mr=mr)
    t.buffer.copy_from_host(b"rmm under devmm")
    assert bytes(t.buffer.copy_to_host(nbytes=15)) == b"rmm under devmm"
    t.buffer.free()


CHECKS: dict[str, Callable[[], None]] = {
    "torch": check_torch,
    "torch-pool": check_torch_pool,
    "cupy": check_cupy,
    "numba": check_numba,
    "rmm": check_rmm,
}

#: The distribution each bridge's framework is (a top-level module name).
FRAMEWORKS = {
    "torch": "torch",
    "torch-pool": "torch",
    "cupy": "cupy",
    "numba": "numba_cuda",
    "rmm": "rmm",
}

SKIPPED = 3


def run_one(name: str) -> int:
    """Runs one bridge's check here; prints its JSON line and returns 0
    (passed), 1 (failed) or 3 (skipped)."""
    framework = FRAMEWORKS[name]
    if importlib.util.find_spec(framework) is None:
        status, detail = "skipped", f"not installed: {framework}"
    elif os.environ.get("DEVMM_SMOKE_REHEARSAL") == "1":
        status, detail = "skipped", f"hardware only: {framework} installed, needs a real driver"
    else:
        try:
            CHECKS[name]()
            status, detail = "passed", (CHECKS[name].__doc__ or "").split("\n")[0]
        except Exception as e:  # noqa: BLE001 (the report carries any failure)
            traceback.print_exc()
            status, detail = "failed", f"{type(e).__name__}: {e}"
    print(json.dumps({"check": f"bridge-{name}", "status": status, "detail": detail}), flush=True)
    return {"passed": 0, "failed": 1, "skipped": SKIPPED}[status]


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--one" and argv[1] in CHECKS:
        return run_one(argv[1])
    names = argv or list(CHECKS)
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        print(f"unknown bridges {unknown}; choose from {list(CHECKS)}", file=sys.stderr)
        return 2
    failed = 0
    for name in names:
        run = subprocess.run([sys.executable, __file__, "--one", name], timeout=300)
        failed += run.returncode not in (0, SKIPPED)
        outcome = {0: "PASS", SKIPPED: "SKIP"}.get(run.returncode, "FAIL")
        print(f"{outcome} {name}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
