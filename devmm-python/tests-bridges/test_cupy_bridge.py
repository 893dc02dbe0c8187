"""CuPy both ways against the real cupy package over devmm's fake CUDA
runtime. CuPy's allocator machinery (set_allocator, get_allocator,
cupy.cuda.alloc, MemoryPointer, UnownedMemory) runs without a GPU; its
current-device and current-stream queries and its stream and device
context managers ask the driver, so the tests stand in for exactly those
and check devmm asked them the right question."""

from __future__ import annotations

import contextlib
import ctypes
import gc
from collections.abc import Iterator
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import cupy
import pytest

import devmm
import devmm.integrations.cupy as bridge
import devmm.testing
from devmm.integrations import Installer
from devmm.mrs.cuda import CudaRuntimeMemoryResource, CupyAllocatorMemoryResource

if TYPE_CHECKING:
    from conftest import FakeDriver


@pytest.fixture
def cupy_state(monkeypatch: pytest.MonkeyPatch, cuda0: devmm.Device) -> SimpleNamespace:
    """CuPy's view of the current device and stream, which needs a driver."""
    state = SimpleNamespace(device=0, stream=devmm.runtime_for(cuda0).create_stream(cuda0), entered=[])
    monkeypatch.setattr(cupy.cuda.runtime, "getDevice", lambda: state.device)
    monkeypatch.setattr(cupy.cuda, "get_current_stream", lambda: SimpleNamespace(ptr=state.stream.handle))

    @contextlib.contextmanager
    def device(index: int) -> Iterator[None]:
        state.entered.append(("device", index))
        yield

    @contextlib.contextmanager
    def external_stream(handle: int) -> Iterator[None]:
        # The seed's call: the stream of the device made current before it.
        state.entered.append(("stream", handle))
        yield

    monkeypatch.setattr(cupy.cuda, "Device", device)
    monkeypatch.setattr(cupy.cuda, "ExternalStream", external_stream)
    return state


@pytest.fixture
def restore_allocator() -> Iterator[None]:
    before = cupy.cuda.get_allocator()
    yield
    cupy.cuda.set_allocator(before)


class FakePool:
    """A CuPy allocator (``f(nbytes) -> MemoryPointer``) over devmm's fake CUDA memory."""

    def __init__(self) -> None:
        self.backing = CudaRuntimeMemoryResource()
        self.live = 0

    def __call__(self, nbytes: int) -> Any:
        ptr = self.backing.allocate(nbytes)
        self.live += 1
        owner = self  # noqa: F841  (kept alive by the memory below)

        class Block:
            def __del__(block) -> None:  # noqa: N805
                self.backing.deallocate(ptr, nbytes)
                self.live -= 1

        return cupy.cuda.MemoryPointer(cupy.cuda.UnownedMemory(ptr, nbytes, Block(), 0), 0)


def test_cupy_allocates_through_devmm(cupy_state: SimpleNamespace, cuda_stats: devmm.StatisticsAdaptor, restore_allocator: None) -> None:
    previous = cupy.cuda.get_allocator()
    installer = bridge.install(cuda_stats)
    assert isinstance(installer, Installer) and repr(installer) == "Installer(library='CuPy', installed)"
    assert bridge._is_devmm_allocator(cupy.cuda.get_allocator())
    # Its repr names what made it, which a user can find.
    assert repr(cupy.cuda.get_allocator()) == f"<CuPy allocator from devmm.integrations.cupy.install({cuda_stats!r})>"
    pointer = cupy.cuda.alloc(1000)  # CuPy's own entry point
    assert (cuda_stats.current_bytes, cuda_stats.allocations) == (1000, 1)
    assert pointer.mem.size == 1000 and pointer.device_id == 0
    # The memory is the devmm buffer's: bytes written there read back through devmm.
    ctypes.memmove(pointer.ptr, b"cupy", 4)
    # UnownedMemory's owner keeps the devmm buffer alive, and CuPy's stream
    # object, which the buffer's free is queued on.
    owner = pointer.mem._owner
    assert owner.stream.ptr == cupy.cuda.get_current_stream().ptr
    buffer = owner.buffer
    assert isinstance(buffer, devmm.DeviceBuffer) and bytes(buffer.copy_to_host(nbytes=4)) == b"cupy"
    # Allocated on CuPy's current stream, as the runtime's own wrap of it
    # (which knows a per-thread default stream's thread).
    assert buffer.stream.handle == cupy_state.stream.handle
    assert type(buffer.stream) is devmm.Stream and buffer.stream == cupy_state.stream
    del pointer, owner, buffer
    gc.collect()
    assert cuda_stats.current_bytes == 0 and cuda_stats.deallocations == 1
    installer.uninstall()
    assert cupy.cuda.get_allocator() is previous


def test_another_current_device_is_refused(cupy_state: SimpleNamespace, cuda_stats: devmm.StatisticsAdaptor, restore_allocator: None) -> None:
    with bridge.install(cuda_stats):
        cupy_state.device = 1
        with pytest.raises(ValueError, match="CUDA device 1, but its devmm allocator serves cuda:0"):
            cupy.cuda.alloc(16)
    assert cuda_stats.allocations == 0


def test_cupy_allocators_round_trip_as_devmm_resources(cupy_state: SimpleNamespace, cuda0: devmm.Device) -> None:
    pool = FakePool()
    mr = CupyAllocatorMemoryResource(pool, cuda0)
    assert mr.allocator is pool and mr.stream_ordered and mr.guaranteed_alignment() == 256
    stream = devmm.runtime_for(cuda0).create_stream(cuda0)
    t = devmm.empty((8,), "int32", device=cuda0, mr=mr, stream=stream)
    # CuPy allocated with the device current and devmm's stream as its current one.
    assert cupy_state.entered == [("device", 0), ("stream", stream.handle)]
    t.buffer.copy_from_host(b"pooled")
    assert bytes(t.buffer.copy_to_host(nbytes=6)) == b"pooled" and pool.live == 1
    t.buffer.free()
    gc.collect()
    assert pool.live == 0  # the MemoryPointer went back to CuPy
    devmm.testing.mr_conformance(lambda: CupyAllocatorMemoryResource(pool, cuda0))


def test_a_free_on_another_stream_orders_cupys_reuse_after_that_stream(
    cupy_state: SimpleNamespace, cuda0: devmm.Device, fake_cudart: FakeDriver
) -> None:
    # CuPy's pool takes a chunk back into the arena of the stream it was
    # allocated on, for that stream's next allocation: work still queued on
    # the stream the free names must come first there.
    pool = FakePool()
    mr = CupyAllocatorMemoryResource(pool, cuda0)
    runtime = devmm.runtime_for(cuda0)
    allocated_on, freed_on = runtime.create_stream(cuda0), runtime.create_stream(cuda0)
    buffer = devmm.DeviceBuffer(64, mr=mr, stream=allocated_on)
    waits = fake_cudart.calls("cudaStreamWaitEvent")
    buffer.free(stream=freed_on)
    gc.collect()
    assert pool.live == 0
    assert fake_cudart.calls("cudaStreamWaitEvent") == waits + 1
    # On the allocation's own stream, nothing to order.
    devmm.DeviceBuffer(64, mr=mr, stream=allocated_on).free()
    assert fake_cudart.calls("cudaStreamWaitEvent") == waits + 1


def test_the_current_cupy_allocator_is_used_by_default(cupy_state: SimpleNamespace, restore_allocator: None) -> None:
    pool = FakePool()
    cupy.cuda.set_allocator(pool)
    mr = CupyAllocatorMemoryResource()
    ptr = mr.allocate(100)
    assert pool.live == 1 and mr._debug_live_count() == 1
    with pytest.raises(ValueError, match="did not hand out 99 bytes"):
        mr.deallocate(ptr, 99)
    mr.deallocate(ptr, 100)
    gc.collect()
    assert pool.live == 0


def test_both_arrows_for_cupy_are_a_cycle(cupy_state: SimpleNamespace, cuda_stats: devmm.StatisticsAdaptor, restore_allocator: None) -> None:
    with pytest.raises(ValueError, match="into CuPy would create an allocation cycle"):
        bridge.install(devmm.LimitingAdaptor(CupyAllocatorMemoryResource(FakePool()), limit_bytes=1 << 20))
    with bridge.install(cuda_stats):
        with pytest.raises(ValueError, match="devmm's own"):
            CupyAllocatorMemoryResource()
        consumer = CupyAllocatorMemoryResource(FakePool())
        consumer.deallocate(consumer.allocate(8), 8)
    with pytest.raises(ValueError, match="must live on a cuda device"):
        bridge.install(devmm.mrs.cpu.MallocMemoryResource())
    with pytest.raises(ValueError, match="CUDA devices, not rocm:0"):
        CupyAllocatorMemoryResource(FakePool(), "rocm:0")


def test_uninstall_out_of_order_is_refused(cupy_state: SimpleNamespace, cuda_stats: devmm.StatisticsAdaptor, restore_allocator: None) -> None:
    before = cupy.cuda.get_allocator()
    first = bridge.install(cuda_stats)
    second = bridge.install(devmm.StatisticsAdaptor(CudaRuntimeMemoryResource()))
    with pytest.raises(RuntimeError, match="reverse order of install"):
        first.uninstall()
    second.uninstall()
    first.uninstall()
    assert cupy.cuda.get_allocator() is before


def test_a_refusal_reaches_cupy_callers_as_memory_error(cupy_state: SimpleNamespace, restore_allocator: None) -> None:
    limited = devmm.LimitingAdaptor(CudaRuntimeMemoryResource(), limit_bytes=64)
    with bridge.install(limited):
        with pytest.raises(MemoryError, match="would exceed the 64-byte limit"):
            cupy.cuda.alloc(100)
    assert limited.used_bytes == 0


def test_cupy_out_of_memory_is_devmms_error_and_runs_the_hooks_once(
    cupy_state: SimpleNamespace, restore_allocator: None
) -> None:
    seen: list[BaseException] = []
    limited = devmm.LimitingAdaptor(CudaRuntimeMemoryResource(), limit_bytes=64)
    with bridge.install(limited), devmm.on_out_of_memory(seen.append):
        with pytest.raises(devmm.OutOfMemoryError) as caught:
            cupy.cuda.alloc(100)
    assert (caught.value.device, caught.value.nbytes, caught.value.largest_fit) == (limited.device, 100, 64)
    assert len(seen) == 1 and isinstance(seen[0], devmm.OutOfMemoryError) and seen[0].nbytes == 100


def test_cupy_reads_devmm_streams_through_the_cuda_stream_protocol(cuda0: devmm.Device) -> None:
    """`cupy.cuda.Stream.from_external` takes any object with
    `__cuda_stream__`: a runtime's stream and a stream written in Python."""
    native = devmm.runtime_for(cuda0).create_stream(cuda0)
    adopted = cupy.cuda.Stream.from_external(native)
    assert adopted.ptr == native.handle != 0

    class Wrapped(devmm.Stream):
        def __init__(self) -> None:
            self.device = cuda0

        @property
        def handle(self) -> int:
            return native.handle

        def synchronize(self) -> None:
            native.synchronize()

        def wait_raw(self, other_handle: int) -> None:
            native.wait_raw(other_handle)

    assert cupy.cuda.Stream.from_external(Wrapped()).ptr == native.handle
