"""NEP 49: NumPy allocating through devmm, and NumPy's allocator as a resource."""

import ctypes
import gc
import logging

import numpy as np
import pytest

import devmm
import devmm.integrations.numpy as devmm_numpy
from devmm.mrs.cpu import BytearrayMemoryResource, MallocMemoryResource, NumpyHandlerMemoryResource

try:
    from numpy._core.multiarray import get_handler_name
except ImportError:  # numpy < 2
    from numpy.core.multiarray import get_handler_name  # type: ignore[no-redef]


def test_install_accounts_every_numpy_allocation() -> None:
    stats = devmm.StatisticsAdaptor(MallocMemoryResource())
    before = get_handler_name()
    with devmm_numpy.install(stats) as installer:
        assert get_handler_name() == "devmm" and installer.installed
        assert installer.mr is stats
        a = np.ones(1000)
        b = np.zeros((10, 10), dtype=np.int32)
        c = np.concatenate([a, a])
        assert stats.current_bytes >= 8000 + 400 + 16000
    assert get_handler_name() == before and not installer.installed
    assert float(c.sum()) == 2000.0
    del a, b, c
    gc.collect()
    assert stats.current_bytes == 0 and stats.total_bytes >= 24400


def test_uninstall_is_idempotent_and_restores() -> None:
    stats = devmm.StatisticsAdaptor(BytearrayMemoryResource())
    installer = devmm_numpy.install(stats)
    try:
        x = np.empty(64, dtype=np.uint8)
        resized = np.resize(x, 4096)  # realloc-like paths
        assert resized.nbytes == 4096
    finally:
        installer.uninstall()
        installer.uninstall()
    assert get_handler_name() != "devmm"
    total = stats.total_bytes
    np.ones(100)
    assert stats.total_bytes == total
    del x, resized
    gc.collect()
    assert stats.current_bytes == 0


def test_limits_become_numpy_memory_errors() -> None:
    limited = devmm.LimitingAdaptor(MallocMemoryResource(), limit_bytes=1024)
    with devmm_numpy.install(limited):
        small = np.ones(10)
        with pytest.raises(MemoryError):
            np.ones(10_000)
    del small


def test_numpys_out_of_memory_runs_devmms_hooks_once() -> None:
    # NumPy raises its own MemoryError from the NULL it gets; the hooks see
    # devmm's error, with its figures, first.
    seen: list[BaseException] = []
    limited = devmm.LimitingAdaptor(MallocMemoryResource(), limit_bytes=1024)
    with devmm_numpy.install(limited), devmm.on_out_of_memory(seen.append):
        with pytest.raises(MemoryError):
            np.ones(10_000)
    assert len(seen) == 1 and isinstance(seen[0], devmm.OutOfMemoryError)
    assert (seen[0].nbytes, seen[0].largest_fit) == (80_000, 1024)


def test_a_resource_error_inside_numpys_allocator_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    # NumPy's allocator can only return NULL (NumPy raises MemoryError), so
    # the resource's own error is logged on devmm's ``devmm.mr`` logger, as
    # the seed's handler logs it; a refusal for want of memory is not.
    class Corrupt(devmm.DeviceMemoryResource):
        dereferenceable = True

        def allocate(self, nbytes: int, stream: object = None) -> int:
            raise KeyError("the arena's index is corrupt")

        def deallocate(self, ptr: int, nbytes: int, stream: object = None) -> None:
            raise AssertionError("nothing was allocated")

    with caplog.at_level(logging.ERROR, logger="devmm.mr"):
        with devmm_numpy.install(Corrupt()):
            with pytest.raises(MemoryError):
                np.ones(1000)
        logged = [r for r in caplog.records if r.name == "devmm.mr"]
        assert len(logged) == 1 and logged[0].levelno == logging.ERROR
        assert "the arena's index is corrupt" in logged[0].getMessage()
        assert "8000" in logged[0].getMessage()
        caplog.clear()
        with devmm_numpy.install(devmm.LimitingAdaptor(MallocMemoryResource(), limit_bytes=64)):
            with pytest.raises(MemoryError):
                np.ones(1000)
        assert not [r for r in caplog.records if r.name == "devmm.mr"]

        class Exhausted(devmm.DeviceMemoryResource):
            dereferenceable = True

            def allocate(self, nbytes: int, stream: object = None) -> int:
                raise MemoryError("the arena is full")

            def deallocate(self, ptr: int, nbytes: int, stream: object = None) -> None:
                raise AssertionError("nothing was allocated")

        with devmm_numpy.install(Exhausted()):
            with pytest.raises(MemoryError):
                np.ones(1000)
        assert not [r for r in caplog.records if r.name == "devmm.mr"]


class _Allocator(ctypes.Structure):
    """NumPy's ``PyDataMemAllocator``, after the handler's 128-byte name and version."""

    _fields_ = [
        ("ctx", ctypes.c_void_p),
        ("malloc", ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)),
        ("calloc", ctypes.c_void_p),
        ("realloc", ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)),
        ("free", ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)),
    ]


def test_a_block_the_handler_never_allocated_is_logged_not_touched(caplog: pytest.LogCaptureFixture) -> None:
    # As the seed's handler does: NumPy's free and realloc of a pointer the
    # handler does not know are errors on ``devmm.mr``; nothing is freed.
    stats = devmm.StatisticsAdaptor(MallocMemoryResource())
    capsule = devmm._devmm._numpy_handler_over(stats)
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    allocator = _Allocator.from_address(get_pointer(capsule, b"mem_handler") + 128)
    stranger = ctypes.create_string_buffer(64)
    with caplog.at_level(logging.ERROR, logger="devmm.mr"):
        allocator.free(allocator.ctx, ctypes.addressof(stranger), 64)
        assert allocator.realloc(allocator.ctx, ctypes.addressof(stranger), 128) is None
        block = allocator.malloc(allocator.ctx, 32)
        allocator.free(allocator.ctx, block, 32)
    logged = [r.getMessage() for r in caplog.records if r.name == "devmm.mr"]
    assert len(logged) == 2 and all(f"{ctypes.addressof(stranger):#x}" in m for m in logged), logged
    assert "free" in logged[0] and "realloc" in logged[1]
    assert (stats.allocations, stats.deallocations, stats.current_bytes) == (1, 1, 0)


def test_a_free_the_resource_refuses_is_logged_with_its_pointer(caplog: pytest.LogCaptureFixture) -> None:
    # NumPy's free cannot fail: the resource's error is logged, naming the block.
    backing = MallocMemoryResource()

    class Stuck(devmm.DeviceMemoryResource):
        dereferenceable = True

        def allocate(self, nbytes: int, stream: object = None) -> int:
            return backing.allocate(nbytes)

        def deallocate(self, ptr: int, nbytes: int, stream: object = None) -> None:
            raise KeyError("the arena lost its index")

    capsule = devmm._devmm._numpy_handler_over(Stuck())
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    allocator = _Allocator.from_address(get_pointer(capsule, b"mem_handler") + 128)
    with caplog.at_level(logging.ERROR, logger="devmm.mr"):
        block = allocator.malloc(allocator.ctx, 48)
        allocator.free(allocator.ctx, block, 48)
    logged = [r.getMessage() for r in caplog.records if r.name == "devmm.mr"]
    assert len(logged) == 1 and "could not free" in logged[0], logged
    assert f"{block:#x}" in logged[0] and "the arena lost its index" in logged[0], logged
    backing.deallocate(block, 48)


def test_install_refuses_device_memory_and_cycles() -> None:
    gpu = devmm.CallbackMemoryResource(lambda n, s: 0, lambda p, n, s: None, "cuda:0")
    with pytest.raises(ValueError, match="host"):
        devmm_numpy.install(gpu)
    with pytest.raises(ValueError, match="cycle"):
        devmm_numpy.install(devmm.StatisticsAdaptor(NumpyHandlerMemoryResource()))
    with devmm_numpy.install(MallocMemoryResource()):
        with pytest.raises(ValueError, match="cycle"):
            NumpyHandlerMemoryResource()


_REENTRANT_FREE = """
import ctypes
import numpy as np
import devmm
import devmm.integrations.numpy as devmm_numpy

blocks = {}

def alloc(nbytes, stream):
    block = bytearray(nbytes + 64)
    addr = ctypes.addressof((ctypes.c_char * len(block)).from_buffer(block))
    aligned = (addr + 63) & ~63
    blocks[aligned] = block
    return aligned

reentered = []

def dealloc(ptr, nbytes, stream):
    del blocks[ptr]
    if reentered:
        return
    # NumPy allocates and frees (through the installed handler) while the
    # handler is freeing: the handler must not hold its lock across the free.
    reentered.append(ptr)
    scratch = np.arange(4)
    assert int(scratch.sum()) == 6
    del scratch

mr = devmm.CallbackMemoryResource(alloc, dealloc, alignment=64, dereferenceable=True)
with devmm_numpy.install(mr):
    a = np.ones(1000)
    del a
print("freed", len(blocks), len(reentered))
"""


def test_handler_free_may_reenter_numpy() -> None:
    import subprocess
    import sys

    # A deadlock would hang the test run; a child with a timeout fails instead.
    done = subprocess.run([sys.executable, "-c", _REENTRANT_FREE], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "freed 0 1"


def test_uninstall_out_of_order_is_refused() -> None:
    before = get_handler_name()
    outer_mr = devmm.StatisticsAdaptor(MallocMemoryResource())
    inner_mr = devmm.StatisticsAdaptor(MallocMemoryResource())
    outer = devmm_numpy.install(outer_mr)
    inner = devmm_numpy.install(inner_mr)
    try:
        with pytest.raises(RuntimeError, match="reverse order of install"):
            outer.uninstall()
        # Nothing changed: the inner handler is still the one NumPy uses.
        assert outer.installed and inner.installed
        a = np.ones(100)
        assert inner_mr.current_bytes >= 800 and outer_mr.current_bytes == 0
        del a
    finally:
        inner.uninstall()
        outer.uninstall()
    assert get_handler_name() == before
    assert not outer.installed and not inner.installed
    total = outer_mr.total_bytes + inner_mr.total_bytes
    np.ones(100)
    assert outer_mr.total_bytes + inner_mr.total_bytes == total


def test_swallowed_callback_exceptions_are_not_kept_alive() -> None:
    import ctypes
    import weakref

    class Boom(Exception):
        pass

    raised: list[weakref.ref[Boom]] = []
    blocks: dict[int, bytearray] = {}

    def alloc(nbytes: int, stream: object) -> int:
        block = bytearray(nbytes + 64)
        addr = ctypes.addressof((ctypes.c_char * len(block)).from_buffer(block))
        blocks[(addr + 63) & ~63] = block
        return (addr + 63) & ~63

    def dealloc(ptr: int, nbytes: int, stream: object) -> None:
        boom = Boom("free failed")
        raised.append(weakref.ref(boom))
        raise boom

    with devmm_numpy.install(devmm.CallbackMemoryResource(alloc, dealloc, alignment=64, dereferenceable=True)):
        a = np.ones(100)
    del a  # NumPy's free cannot raise: the error is logged and dropped
    gc.collect()
    assert raised and all(ref() is None for ref in raised)
