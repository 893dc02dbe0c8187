#!/usr/bin/env python3
"""The framework bridges on real hardware: one check per bridge, each in a
process of its own (PyTorch and Numba keep an allocator for life).

    python scripts/gpu-smoke-bridges.py            # every bridge
    python scripts/gpu-smoke-bridges.py torch rmm  # some

Needs a CUDA GPU, the devmm wheel, and the frameworks of
scripts/requirements-bridges.txt (the GPU bundle brings them as wheels).
Prints one ``PASS name`` or ``FAIL name`` line per bridge (the failure's
traceback above it) and exits non-zero when any failed. Nothing here runs
without a GPU; the test suite only imports this file and checks that every
bridge has a check."""

from __future__ import annotations

import subprocess
import sys
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
    """A Numba kernel writes memory Numba took from devmm."""
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
    "cupy": check_cupy,
    "numba": check_numba,
    "rmm": check_rmm,
}


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--one":
        CHECKS[argv[1]]()
        return 0
    names = argv or list(CHECKS)
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        print(f"unknown bridges {unknown}; choose from {list(CHECKS)}", file=sys.stderr)
        return 2
    failed = 0
    for name in names:
        run = subprocess.run([sys.executable, __file__, "--one", name], timeout=300)
        failed += run.returncode != 0
        print(f"{'PASS' if run.returncode == 0 else 'FAIL'} {name}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
