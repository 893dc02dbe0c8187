"""PyTorch through devmm, against the real torch wheel over devmm's fake
CUDA runtime. Without a driver PyTorch cannot initialise CUDA, so no
tensor reaches the allocator here; what runs is everything up to it:
install() makes the real CUDAPluggableAllocator from devmm's own module
and swaps it in, and the entry points PyTorch would call are called
through ctypes, as PyTorch calls them. Tensors allocating through devmm
run in scripts/gpu-smoke-bridges.py.

Installing is for the life of the process (PyTorch never swaps back), so
this module installs once and its tests share that state."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest
import torch

import devmm
import devmm.integrations.torch as bridge
from devmm import _devmm
from devmm.integrations import Installer
from devmm.mrs.cuda import CudaRuntimeMemoryResource


class EntryPoints:
    """devmm's PyTorch hooks, looked up in the extension module's dynamic
    symbol table (as CUDAPluggableAllocator does) and typed as PyTorch
    declares them."""

    def __init__(self) -> None:
        lib = ctypes.CDLL(_devmm.__file__)
        self.malloc = getattr(lib, _devmm.TORCH_MALLOC_SYMBOL)
        self.malloc.restype = ctypes.c_void_p
        self.malloc.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
        self.free = getattr(lib, _devmm.TORCH_FREE_SYMBOL)
        self.free.restype = None
        self.free.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
        self.record_stream = getattr(lib, _devmm.TORCH_RECORD_STREAM_SYMBOL)
        self.record_stream.restype = None
        self.record_stream.argtypes = [ctypes.c_void_p, ctypes.c_void_p]


@pytest.fixture(scope="module")
def installed() -> Iterator[tuple[bridge.TorchInstaller, dict[int, devmm.StatisticsAdaptor]]]:
    resources = {
        i: devmm.StatisticsAdaptor(CudaRuntimeMemoryResource(f"cuda:{i}")) for i in (0, 1)
    }
    assert _devmm.torch_statistics(0) is None
    with pytest.raises(ValueError, match="does not serve PyTorch on CUDA device 0"):
        bridge.memory_stats(0)
    yield bridge.install({f"cuda:{i}": mr for i, mr in resources.items()}), resources


def test_the_entry_points_are_exported_by_the_extension_module() -> None:
    hooks = EntryPoints()
    assert hooks.malloc and hooks.free
    assert (_devmm.TORCH_MALLOC_SYMBOL, _devmm.TORCH_FREE_SYMBOL) == ("devmm_torch_malloc", "devmm_torch_free")


# The two tests below run before the module's install (pytest keeps file order).
def test_install_is_refused_once_pytorch_initialised_cuda(monkeypatch: pytest.MonkeyPatch, cuda_stats: devmm.StatisticsAdaptor) -> None:
    # Runs before the module's install: PyTorch has not made an allocator yet.
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    with pytest.raises(RuntimeError, match="before the first CUDA tensor"):
        bridge.install(cuda_stats)
    assert _devmm.torch_statistics(0) is None  # nothing was routed


def test_bad_resources_are_refused_before_pytorch_is_touched(cuda_stats: devmm.StatisticsAdaptor) -> None:
    with pytest.raises(ValueError, match="not on CUDA device 1"):
        bridge.install({1: cuda_stats})
    with pytest.raises(ValueError, match="needs CUDA device"):
        bridge.install(devmm.mrs.cpu.MallocMemoryResource())
    with pytest.raises(ValueError, match="two resources for CUDA device 0"):
        bridge.install({0: cuda_stats, "cuda:0": cuda_stats})
    assert _devmm.torch_statistics(0) is None


def test_pytorch_allocates_per_device_and_stream(installed: tuple[bridge.TorchInstaller, dict[int, devmm.StatisticsAdaptor]]) -> None:
    installer, resources = installed
    assert isinstance(installer, Installer) and installer.installed
    hooks = EntryPoints()
    rt = devmm.runtime_for("cuda")
    stream = rt.create_stream(devmm.Device.from_string("cuda:1"))
    on0 = hooks.malloc(1000, 0, None)
    on1 = hooks.malloc(4096, 1, stream.handle)
    assert on0 and on1 and on0 % 256 == 0
    assert (resources[0].current_bytes, resources[1].current_bytes) == (1000, 4096)
    ctypes.memmove(on1, b"torch", 5)  # fake device memory is host memory
    assert ctypes.string_at(on1, 5) == b"torch"
    hooks.free(on0, 1000, 0, None)
    hooks.free(on1, 4096, 1, stream.handle)
    assert resources[0].current_bytes == resources[1].current_bytes == 0
    # Zero-byte requests are legal: NULL (ctypes' None), and freeing NULL is a no-op.
    assert hooks.malloc(0, 0, None) is None
    hooks.free(None, 0, 0, None)
    assert resources[0].current_bytes == 0


def test_a_free_waits_for_the_streams_pytorch_recorded(installed: tuple[bridge.TorchInstaller, dict[int, devmm.StatisticsAdaptor]]) -> None:
    """``Tensor.record_stream(s)`` and NCCL's collectives tell the allocator
    a block is used on another stream: PyTorch hands that to the allocator's
    record-stream hook, which install() gives it, and the free then waits for
    the work queued there, or a stream-ordered resource could hand the memory
    out again on the allocation stream while the other stream reads it."""
    lib = ctypes.CDLL(os.environ["DEVMM_TEST_FAKE_CUDART"])
    lib.fake_call_log.restype = ctypes.c_size_t
    lib.fake_call_log.argtypes = [ctypes.c_char_p, ctypes.c_size_t]

    def log() -> list[str]:
        buf = ctypes.create_string_buffer(1 << 20)
        lib.fake_call_log(buf, len(buf))
        return buf.value.decode().splitlines()

    _, resources = installed
    assert bridge._allocators[_devmm.TORCH_MALLOC_SYMBOL] is not None
    hooks = EntryPoints()
    rt = devmm.runtime_for("cuda")
    gpu = devmm.Device.from_string("cuda:0")
    own, other = rt.create_stream(gpu), rt.create_stream(gpu)
    block = hooks.malloc(4096, 0, own.handle)
    hooks.record_stream(block, other.handle)
    hooks.record_stream(block, other.handle)  # once is enough
    hooks.record_stream(block, own.handle)  # its own stream: nothing to wait for
    lib.fake_clear_calls()
    hooks.free(block, 4096, 0, own.handle)
    assert resources[0].current_bytes == 0
    calls = [line.split(" ")[0] for line in log()]
    assert calls.count("cudaStreamWaitEvent") == 1, log()
    waited = next(line for line in log() if line.startswith("cudaStreamWaitEvent"))
    assert f"{own.handle:#x}" in waited, (waited, own.handle)
    recorded = next(line for line in log() if line.startswith("cudaEventRecord"))
    assert f"{other.handle:#x}" in recorded, (recorded, other.handle)
    assert calls.index("cudaStreamWaitEvent") < calls.index("cudaFreeAsync"), calls
    # A stream of another device cannot be waited on from this one: the
    # device's work is waited for instead, and the block is still freed.
    elsewhere = rt.create_stream(devmm.Device.from_string("cuda:1"))
    block = hooks.malloc(4096, 0, own.handle)
    hooks.record_stream(block, elsewhere.handle)
    lib.fake_clear_calls()
    hooks.free(block, 4096, 0, own.handle)
    assert resources[0].current_bytes == 0
    calls = [line.split(" ")[0] for line in log()]
    # Every device's work, the other stream's device among them.
    synchronized = [line for line in log() if line.startswith("cudaDeviceSynchronize")]
    assert len(synchronized) == 2 and "cudaFreeAsync" in calls, log()
    # PyTorch records streams for every CUDA tensor, imports included: a
    # block devmm never handed out is none of its business.
    hooks.record_stream(4096, other.handle)


def test_memory_stats_speak_pytorchs_keys(installed: tuple[bridge.TorchInstaller, dict[int, devmm.StatisticsAdaptor]]) -> None:
    hooks = EntryPoints()
    base = bridge.memory_stats(0)
    a = hooks.malloc(300, 0, None)
    b = hooks.malloc(700, 0, None)
    hooks.free(b, 700, 0, None)
    stats = bridge.memory_stats("cuda:0")
    assert list(stats) == sorted(stats)
    assert stats["allocated_bytes.all.current"] == base["allocated_bytes.all.current"] + 300
    assert stats["allocated_bytes.all.peak"] >= base["allocated_bytes.all.current"] + 1000
    assert stats["allocated_bytes.all.allocated"] == base["allocated_bytes.all.allocated"] + 1000
    assert stats["allocated_bytes.all.freed"] == base["allocated_bytes.all.freed"] + 700
    assert stats["allocation.all.current"] == base["allocation.all.current"] + 1
    assert stats["allocation.all.allocated"] == base["allocation.all.allocated"] + 2
    assert stats["reserved_bytes.all.current"] == stats["allocated_bytes.all.current"]
    assert stats["num_ooms"] == 0
    bridge.reset_peak_memory_stats(torch.device("cuda", 0))
    after = bridge.memory_stats(0)
    assert after["allocated_bytes.all.peak"] == after["allocated_bytes.all.current"]
    assert after["allocated_bytes.all.allocated"] == stats["allocated_bytes.all.allocated"]
    hooks.free(a, 300, 0, None)


def test_a_second_install_and_uninstall_are_refused(installed: tuple[bridge.TorchInstaller, dict[int, devmm.StatisticsAdaptor]], cuda_stats: devmm.StatisticsAdaptor) -> None:
    installer, resources = installed
    # The advice is one PyTorch can follow: its installer cannot be undone.
    with pytest.raises(RuntimeError, match=r"already serves PyTorch's allocations, until the process exits .*give one install\(\) every device's resource"):
        bridge.install(cuda_stats)
    with pytest.raises(RuntimeError, match="cannot swap away from a pluggable CUDA allocator"):
        installer.uninstall()
    # PyTorch itself refuses to swap, which is why.
    with pytest.raises(RuntimeError, match="Can't swap an already initialized allocator"):
        torch.cuda.memory.change_current_allocator(
            torch.cuda.memory.CUDAPluggableAllocator(_devmm.__file__, "devmm_torch_malloc", "devmm_torch_free")
        )
    # Still serving.
    hooks = EntryPoints()
    ptr = hooks.malloc(64, 0, None)
    assert resources[0].current_bytes == 64
    hooks.free(ptr, 64, 0, None)


FAILING = textwrap.dedent(
    """
    import ctypes
    import devmm
    from devmm import _devmm
    from devmm.mrs.cuda import CudaRuntimeMemoryResource

    _devmm.torch_route([devmm.LimitingAdaptor(CudaRuntimeMemoryResource(), limit_bytes=100)])
    def hook(error):
        print("hook", type(error).__name__, error.device, error.nbytes, error.largest_fit, flush=True)
    devmm.on_out_of_memory(hook)
    lib = ctypes.CDLL(_devmm.__file__)
    lib.devmm_torch_malloc.restype = ctypes.c_void_p
    lib.devmm_torch_malloc.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
    print("asking", flush=True)
    lib.devmm_torch_malloc({nbytes}, {device}, None)
    print("returned", flush=True)
    """
)


@pytest.mark.parametrize(
    ("nbytes", "device", "reason"),
    [(1000, 0, "would exceed the 100-byte limit"), (8, 3, "CUDA device 3, which has no devmm resource")],
)
def test_a_failed_allocation_is_thrown_to_the_cpp_caller(nbytes: int, device: int, reason: str) -> None:
    # PyTorch's hook takes a C++ exception (and raises RuntimeError); a
    # caller that cannot, like ctypes here, ends in std::terminate, which
    # names the exception. devmm's own message is logged first.
    script = FAILING.format(nbytes=nbytes, device=device)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    # An out-of-memory error runs devmm's hooks, once, before the throw; a
    # device devmm does not serve is no out-of-memory error.
    hooks = ["hook OutOfMemoryError cuda:0 1000 100"] if nbytes == 1000 else []
    assert result.returncode != 0 and result.stdout.split("\n")[:-1] == ["asking", *hooks], result.stdout
    assert "PyTorch allocation failed" in result.stderr and reason in result.stderr
    assert "terminate called after throwing an instance of 'std::bad_alloc'" in result.stderr


def test_reserved_bytes_are_the_pools_when_the_resource_has_one() -> None:
    # A process of its own: PyTorch keeps the first allocator it is given.
    script = textwrap.dedent(
        """
        import ctypes
        import torch
        import devmm
        import devmm.integrations.torch as bridge
        from devmm import _devmm
        from devmm.mrs.cuda import CudaAsyncMemoryResource

        mr = devmm.StatisticsAdaptor(CudaAsyncMemoryResource("cuda:0", release_threshold=64 << 20))
        bridge.install(mr)
        lib = ctypes.CDLL(_devmm.__file__)
        malloc = getattr(lib, _devmm.TORCH_MALLOC_SYMBOL)
        malloc.restype = ctypes.c_void_p
        malloc.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
        free = getattr(lib, _devmm.TORCH_FREE_SYMBOL)
        free.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
        a = malloc(3 << 20, 0, None)
        b = malloc(5 << 20, 0, None)
        free(b, 5 << 20, 0, None)
        devmm.runtime_for("cuda:0").default_stream("cuda:0").synchronize()
        stats = bridge.memory_stats(0)
        assert stats["allocated_bytes.all.current"] == 3 << 20, stats
        # The pool reserves in 2 MiB chunks and keeps freed memory up to its threshold.
        assert stats["reserved_bytes.all.current"] == 8 << 20, stats
        assert stats["reserved_bytes.all.peak"] == 8 << 20, stats
        free(a, 3 << 20, 0, None)
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
