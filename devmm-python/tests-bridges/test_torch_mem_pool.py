"""``devmm.integrations.torch.mem_pool`` against the real torch wheel over
devmm's fake CUDA runtime. PyTorch makes a ``MemPool`` only with a driver,
so here the wiring is checked up to it: the pool is given the pluggable
allocator built from devmm's own module and entry points, those entry
points serve the resource, and what cannot work says so. A
``use_mem_pool`` block with tensors runs in scripts/gpu-smoke-bridges.py.

Routes are for the life of the process, so each test runs in a process of
its own."""

from __future__ import annotations

import subprocess
import sys
import textwrap

PRELUDE = textwrap.dedent(
    """
    import ctypes
    import torch
    import devmm
    import devmm.integrations.torch as bridge
    from devmm import _devmm
    from devmm.mrs.cuda import CudaRuntimeMemoryResource

    lib = ctypes.CDLL(_devmm.__file__)
    malloc = getattr(lib, _devmm.TORCH_MALLOC_SYMBOL)
    malloc.restype = ctypes.c_void_p
    malloc.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
    free = getattr(lib, _devmm.TORCH_FREE_SYMBOL)
    free.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
    pool_free = getattr(lib, _devmm.TORCH_POOL_FREE_SYMBOL)
    pool_free.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
    pool_malloc = getattr(lib, _devmm.TORCH_POOL_MALLOC_SYMBOL)
    pool_malloc.restype = ctypes.c_void_p
    pool_malloc.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
    """
)


def run(script: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(script)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_without_cuda_in_pytorch_the_pool_is_refused_and_nothing_is_routed() -> None:
    out = run(
        """
        mr = devmm.StatisticsAdaptor(CudaRuntimeMemoryResource("cuda:0"))
        assert not torch.cuda.is_available()
        try:
            bridge.mem_pool(mr)
        except RuntimeError as e:
            print(e)
        assert _devmm.torch_statistics(0) is None
        """
    )
    assert "has no usable CUDA (torch.cuda.is_available() is False)" in out, out
    assert "StatisticsAdaptor" in out and "run on a machine with a CUDA GPU" in out, out


def test_the_pool_is_made_over_devmms_entry_points_which_serve_the_resource() -> None:
    out = run(
        """
        made = []
        class Recorded(torch.cuda.memory.CUDAPluggableAllocator):
            def __init__(self, *args):
                made.append(args)
                super().__init__(*args)
        class Pool:  # stands in for torch.cuda.MemPool, which needs a driver
            def __init__(self, allocator):
                self.allocator = allocator
        torch.cuda.memory.CUDAPluggableAllocator = Recorded
        torch.cuda.MemPool = Pool
        torch.cuda.is_available = lambda: True

        mr = devmm.StatisticsAdaptor(CudaRuntimeMemoryResource("cuda:0"))
        pool = bridge.mem_pool(mr)
        assert made == [(_devmm.__file__, "devmm_torch_pool_malloc", "devmm_torch_pool_free")], made
        assert isinstance(pool.allocator, torch._C._cuda_CUDAAllocator), pool.allocator
        # A second pool over the same resource shares the allocator.
        again = bridge.mem_pool(mr)
        assert again.allocator is pool.allocator and len(made) == 1

        # What PyTorch does in a use_mem_pool block: the pool's allocator
        # calls the entry points, which allocate from mr.
        block = pool_malloc(4096, 0, None)
        assert mr.current_bytes == 4096 and block % 256 == 0
        assert bridge.memory_stats(0)["allocated_bytes.all.current"] == 4096
        # After the block has ended PyTorch frees through the same entry point.
        pool_free(block, 4096, 0, None)
        assert mr.current_bytes == 0 and mr.deallocations == 1
        assert bridge.memory_stats(0)["allocation.all.freed"] == 1
        # Out of memory, the pool's entry point returns NULL, which PyTorch's
        # caching allocator answers by freeing its cached blocks and trying
        # again before it raises torch.OutOfMemoryError (a thrown
        # std::bad_alloc would skip both).
        # PyTorch counts and reports the OOMs it cannot recover from itself,
        # and runs its own observers: devmm's hooks do not run, nor count it
        # (the install() entry point, which PyTorch does not retry, does).
        hooked = []
        hook = devmm.on_out_of_memory(hooked.append)
        assert pool_malloc(1 << 62, 0, None) is None
        assert bridge.memory_stats(0)["num_ooms"] == 0 and hooked == [], hooked
        hook.remove()

        # A device has one resource: another one, or host memory, is refused.
        for other in (devmm.StatisticsAdaptor(CudaRuntimeMemoryResource("cuda:0")),
                      devmm.mrs.cpu.MallocMemoryResource()):
            try:
                bridge.mem_pool(other)
            except ValueError as e:
                print(e)
        try:
            bridge.mem_pool("cuda:0")
        except TypeError as e:
            print(e)
        # Device 1 gets a resource of its own.
        on1 = devmm.StatisticsAdaptor(CudaRuntimeMemoryResource("cuda:1"))
        bridge.mem_pool(on1)
        free(malloc(64, 1, None), 64, 1, None)
        assert on1.allocations == 1 and mr.allocations == 1
        """
    )
    lines = out.splitlines()
    assert len(lines) == 3, out
    assert "CUDA device 0 is served to PyTorch by StatisticsAdaptor" in lines[0], out
    assert "use that resource for every devmm MemPool on the device" in lines[0], out
    assert "needs CUDA device (or managed) memory" in lines[1], out
    assert lines[2] == "mem_pool needs a devmm memory resource, not str", out


def test_a_pool_after_install_takes_the_installed_resource() -> None:
    out = run(
        """
        mr = devmm.StatisticsAdaptor(CudaRuntimeMemoryResource("cuda:0"))
        bridge.install(mr)
        torch.cuda.is_available = lambda: True
        torch.cuda.MemPool = lambda allocator: allocator
        bridge.mem_pool(mr)
        try:
            bridge.mem_pool(devmm.StatisticsAdaptor(CudaRuntimeMemoryResource("cuda:0")))
        except ValueError as e:
            print(e)
        """
    )
    assert "CUDA device 0 is served to PyTorch by" in out, out


def test_a_pool_waits_for_no_gil_inside_pytorchs_allocator_lock() -> None:
    """PyTorch's caching allocator calls a pool's entry points with its own
    mutex held, which a thread holding the GIL may wait for (to free a
    tensor): an entry point that then waited for the GIL would deadlock.
    ctypes releases the GIL around the call, as PyTorch's bindings do around
    an operator: the failure's log record waits, marked ``deferred``, until
    a thread of devmm's own emits it (or the next record made where the GIL
    may be taken does), and a chain that runs Python code is refused."""
    out = run(
        """
        import logging, threading, time
        torch.cuda.is_available = lambda: True
        torch.cuda.MemPool = lambda allocator: allocator
        inside = False
        seen = []
        class Seen(logging.Handler):
            def emit(self, record):
                # Whether the thread inside the entry point took the GIL for it
                # (a record it kept is emitted later, marked deferred, by a
                # thread holding no lock of PyTorch's).
                caller = inside and threading.get_ident() == threading.main_thread().ident
                deferred = getattr(record, "deferred", False)
                seen.append((caller, deferred, record.getMessage()))
        logging.getLogger("devmm").addHandler(Seen())
        logging.getLogger("devmm").setLevel(logging.DEBUG)

        retried = devmm.FailureCallbackAdaptor(CudaRuntimeMemoryResource("cuda:0"), lambda n, a: False)
        try:
            bridge.mem_pool(devmm.StatisticsAdaptor(retried))
        except ValueError as e:
            print(e)
        else:
            raise AssertionError("a Python callback under PyTorch's lock must be refused")

        mr = devmm.StatisticsAdaptor(CudaRuntimeMemoryResource("cuda:0"))
        bridge.mem_pool(mr)
        # The same entry point called with the GIL held (ctypes.PyDLL keeps
        # it): a handler would still run under PyTorch's lock, and Python
        # hands the GIL over to other threads while it runs.
        with_gil = getattr(ctypes.PyDLL(_devmm.__file__), _devmm.TORCH_POOL_MALLOC_SYMBOL)
        with_gil.restype = ctypes.c_void_p
        with_gil.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
        inside = True
        assert pool_malloc(1 << 62, 0, None) is None
        assert with_gil(1 << 61, 0, None) is None
        pool_free(4096, 64, 0, None)  # never handed out: an error, logged
        inside = False
        # devmm's own thread emits them, with no devmm call here.
        deadline = time.monotonic() + 30
        while len(seen) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [deferred for _, deferred, _ in seen] == [True] * 3, seen
        # Kept again, it comes out by itself again.
        assert pool_malloc(1 << 62, 0, None) is None
        while len(seen) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(seen) == 4 and seen[3][1], seen
        logged = devmm.LoggingAdaptor(devmm.mrs.cpu.MallocMemoryResource())
        devmm.DeviceBuffer(64, mr=logged).free()
        assert not any(caller for caller, _, _ in seen), seen
        messages = [message for _, _, message in seen]
        failed = [m for m in messages if m.startswith("PyTorch")]
        assert len(failed) == 4, messages
        # A refusal PyTorch recovers from is a debug note, not an error.
        assert failed[0].startswith("PyTorch pool allocation refused"), messages
        assert failed[1].startswith("PyTorch pool allocation refused"), messages
        assert "2305843009213693952 bytes" in failed[1], messages
        assert failed[2].startswith("PyTorch free failed"), messages
        assert failed[3].startswith("PyTorch pool allocation refused"), messages
        assert messages.index(failed[3]) < messages.index(
            next(m for m in messages if m.startswith("allocate"))
        ), messages
        """
    )
    assert "runs code it was given" in out and "FailureCallbackAdaptor" in out, out


def test_install_hands_pytorch_the_record_stream_hook_and_a_pool_does_not() -> None:
    """``Tensor.record_stream`` reaches a pluggable allocator only through
    the hook set on it; a MemPool's caching allocator tracks streams itself."""
    out = run(
        """
        given = []
        original = torch._C._CUDAPluggableAllocator.set_record_stream_fn
        def recorded(self, pointer):
            given.append(pointer)
            return original(self, pointer)
        torch._C._CUDAPluggableAllocator.set_record_stream_fn = recorded
        torch.cuda.is_available = lambda: True
        torch.cuda.MemPool = lambda allocator: allocator

        mr = devmm.StatisticsAdaptor(CudaRuntimeMemoryResource("cuda:0"))
        bridge.install(mr)
        hook = ctypes.cast(getattr(lib, _devmm.TORCH_RECORD_STREAM_SYMBOL), ctypes.c_void_p).value
        assert given == [hook], (given, hook)
        bridge.mem_pool(mr)
        assert given == [hook], given
        print("ok")
        """
    )
    assert out == "ok\n", out
