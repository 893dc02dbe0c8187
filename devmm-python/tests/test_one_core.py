"""The binding layer is thin: one registry (the core's, with a contextvars
scope), Python resources bridged once and recoverable from the core, and
Python exceptions carried through the core as error sources."""

import asyncio
import ctypes
import threading
import traceback
import weakref
from typing import Any

import pytest

import devmm
import devmm.testing
from devmm.mrs.cpu import BytearrayMemoryResource, MallocMemoryResource


class Counted(devmm.DeviceMemoryResource):
    """A Python heap that counts how often devmm reads its probes (the
    bridge reads them when it is made) and can be told to raise."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks: dict[int, bytearray] = {}
        self.probes = 0
        self.raise_on_allocate: BaseException | None = None
        self.raise_on_deallocate: BaseException | None = None

    def allocate(self, nbytes: int, stream: Any = None) -> int:
        if self.raise_on_allocate is not None:
            raise self.raise_on_allocate
        block = bytearray(nbytes + 64)
        addr = ctypes.addressof((ctypes.c_char * len(block)).from_buffer(block))
        aligned = (addr + 63) & ~63
        self.blocks[aligned] = block
        return aligned

    def deallocate(self, ptr: int, nbytes: int, stream: Any = None) -> None:
        if self.raise_on_deallocate is not None:
            raise self.raise_on_deallocate
        del self.blocks[ptr]

    def guaranteed_alignment(self) -> int:
        self.probes += 1
        return 64


class ArenaExhausted(RuntimeError):
    """A user's own exception type, with a field of its own."""

    def __init__(self, arena: str) -> None:
        super().__init__(f"arena {arena} is exhausted")
        self.arena = arena


def test_rust_resolves_the_override_of_the_python_context(cpu: devmm.Device) -> None:
    # DeviceBuffer(n) is resolved by the core's registry, which asks the
    # context-variable scope Python installed.
    stats = devmm.StatisticsAdaptor(MallocMemoryResource())
    with devmm.using_memory_resource(stats):
        buf = devmm.DeviceBuffer(64)
        assert buf.mr is stats and stats.current_bytes == 64
        assert devmm.get_current_memory_resource(cpu) is stats
    buf.free()
    assert stats.current_bytes == 0
    assert devmm.DeviceBuffer(8).mr is not stats


def test_async_tasks_and_threads_keep_their_own_overrides(cpu: devmm.Device) -> None:
    async def task(mr: devmm.DeviceMemoryResource) -> list[bool]:
        seen = []
        with devmm.using_memory_resource(mr):
            for _ in range(3):
                await asyncio.sleep(0)
                seen.append(devmm.DeviceBuffer(8).mr is mr)
                seen.append(devmm.empty((2,), "uint8").buffer.mr is mr)
        return seen

    async def both() -> list[list[bool]]:
        return list(await asyncio.gather(task(BytearrayMemoryResource()), task(MallocMemoryResource())))

    assert all(all(seen) for seen in asyncio.run(both()))

    mine = BytearrayMemoryResource()
    in_thread: list[object] = []
    with devmm.using_memory_resource(mine):
        worker = threading.Thread(target=lambda: in_thread.append(devmm.DeviceBuffer(8).mr))
        worker.start()
        worker.join()
    assert in_thread and in_thread[0] is not mine


def test_a_python_resource_is_bridged_once_and_recovered_from_the_core(cpu: devmm.Device) -> None:
    heap = Counted()
    stats = devmm.StatisticsAdaptor(heap)
    for _ in range(5):
        devmm.DeviceBuffer(16, mr=heap).free()
        devmm.empty((4,), "float32", mr=stats).buffer.free()
    with devmm.using_memory_resource(heap):
        assert devmm.get_current_memory_resource(cpu) is heap
        buf = devmm.DeviceBuffer(32)
        assert buf.mr is heap and buf.ptr in heap.blocks
        buf.free()
    assert heap.probes == 1, "the bridge reads the probes once, when it is made"
    with pytest.raises(AttributeError, match="fixed"):
        heap.device = "cuda_host:0"


def test_a_bridged_python_resource_is_freed_without_the_collector() -> None:
    heap = Counted()
    devmm.DeviceBuffer(16, mr=heap).free()
    ref = weakref.ref(heap)
    del heap
    assert ref() is None, "the bridge must not make a reference cycle"


def test_the_default_resource_keeps_its_identity_across_threads(cpu: devmm.Device) -> None:
    default = devmm.get_current_memory_resource(cpu)
    seen: list[object] = []
    worker = threading.Thread(target=lambda: seen.append(devmm.get_current_memory_resource(cpu)))
    worker.start()
    worker.join()
    assert seen == [default]
    assert devmm.DeviceBuffer(8).mr is default


@pytest.mark.parametrize(
    "raised",
    [ArenaExhausted("gpu0"), KeyboardInterrupt(), MemoryError("no room")],
    ids=["custom", "keyboard-interrupt", "memory-error"],
)
def test_an_allocate_exception_comes_back_as_the_same_object(raised: BaseException) -> None:
    heap = Counted()
    heap.raise_on_allocate = raised
    chain = devmm.StatisticsAdaptor(devmm.LimitingAdaptor(heap, limit_bytes=1 << 20))
    for allocate in (
        lambda: devmm.DeviceBuffer(64, mr=chain),
        lambda: devmm.empty((16,), "float32", mr=chain),
    ):
        with pytest.raises(type(raised)) as caught:
            allocate()
        assert caught.value is raised
        frames = [frame.name for frame in traceback.extract_tb(caught.value.__traceback__)]
        assert "allocate" in frames, frames
    if isinstance(raised, ArenaExhausted):
        value = caught.value
        assert isinstance(value, ArenaExhausted) and value.arena == "gpu0"
        assert str(value) == "arena gpu0 is exhausted"
    assert chain.current_bytes == 0 and chain.allocations == 0


def test_a_deallocate_exception_comes_back_as_the_same_object_with_a_note() -> None:
    heap = Counted()
    buf = devmm.DeviceBuffer(8, mr=devmm.StatisticsAdaptor(devmm.LimitingAdaptor(heap, limit_bytes=64)))
    heap.raise_on_deallocate = raised = ArenaExhausted("host")
    with pytest.raises(ArenaExhausted) as caught:
        buf.free()
    assert caught.value is raised
    assert any("still live" in note for note in getattr(raised, "__notes__", []))
    heap.raise_on_deallocate = None
    buf.free()
    assert heap.blocks == {}


def _closed_tensor() -> devmm.Tensor:
    t = devmm.empty((2,), "float32", layout=devmm.RowMajor())
    t.buffer.free()
    return t


def _null_resource() -> devmm.CallbackMemoryResource:
    return devmm.CallbackMemoryResource(lambda nbytes, stream: 0, lambda ptr, nbytes, stream: None)


# One failure of each core ErrorKind the Python API can reach, and the
# exception the binding's one mapping (devmm-python/src/error.rs) names for it.
KINDS = {
    "OutOfMemory": (lambda: devmm.LimitingAdaptor(MallocMemoryResource(), 64).allocate(65), devmm.OutOfMemoryError),
    "MemoryExhausted": (lambda: _null_resource().allocate(16), MemoryError),
    "InvalidValue": (lambda: devmm.Aligned(devmm.RowMajor(), 0), ValueError),
    "InvalidValue (a closed buffer)": (lambda: _closed_tensor().to("cpu"), ValueError),
    "TestDoubleMisuse": (lambda: devmm.testing.RecordingMemoryResource().deallocate(256, 64), devmm.testing.RecordingMisuseError),
    "RuntimeUnavailable": (lambda: devmm.runtime_for("tpu"), devmm.RuntimeUnavailableError),
    "Io": (lambda: devmm.TraceAdaptor(MallocMemoryResource(), "/nonexistent/dir/trace.csv"), OSError),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_error_kind_is_the_exception_the_mapping_names(kind: str) -> None:
    fails, exception = KINDS[kind]
    with pytest.raises(exception) as raised:
        fails()
    # The exception named, not a base class another mapping would also give
    # (ValueError for everything was the old catch-all's habit).
    assert type(raised.value) is exception or exception is OSError  # OSError picks its errno's subclass


def test_a_closed_buffer_is_refused_as_each_protocol_refuses() -> None:
    # The same core error (the buffer was freed) is one exception per
    # protocol, chosen in one place: DLPack's and the buffer protocol's
    # BufferError, the array interface's BufferError (not the AttributeError
    # that would make NumPy wrap the tensor), a ValueError elsewhere.
    with pytest.raises(BufferError, match="freed|closed"):
        _closed_tensor().__dlpack__()
    with pytest.raises(BufferError, match="freed|closed"):
        memoryview(_closed_tensor())
    with pytest.raises(BufferError, match="freed|closed"):
        _closed_tensor().__array_interface__
    with pytest.raises(ValueError, match="freed|closed"):
        _closed_tensor().to("cpu")


def test_the_library_resources_free_null_by_the_cores_rule() -> None:
    # devmm.mrs's rmm and CuPy resources share CheckedResource, which asks
    # the core (devmm::frees_nothing): null with 0 bytes frees nothing, null
    # with a size is a foreign-free, as MallocMemoryResource says.
    from devmm.mrs._checked import CheckedResource

    freed: list[tuple[int, int]] = []

    class Library(CheckedResource):
        def _allocate(self, nbytes: int, stream: Any) -> int:
            return 4096

        def _deallocate(self, ptr: int, nbytes: int, stream: Any) -> None:
            freed.append((ptr, nbytes))

    mr = Library()
    assert mr.allocate(0) == 0
    mr.deallocate(0, 0)
    mr.deallocate(mr.allocate(16), 16)
    assert freed == [(4096, 16)]
    with pytest.raises(ValueError, match="foreign-free") as ours:
        mr.deallocate(0, 16)
    with pytest.raises(ValueError, match="foreign-free") as native:
        MallocMemoryResource().deallocate(0, 16)
    assert str(ours.value).split(":")[2:] == str(native.value).split(":")[2:]
    assert freed == [(4096, 16)]
