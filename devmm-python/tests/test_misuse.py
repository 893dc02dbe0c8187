"""Misuse from Python is a typed error, never a crash, a leak or corrupt
accounting (issue 11: one test per defect found)."""

import ctypes
import gc
import logging
import weakref
from typing import Any, Callable

import numpy as np
import pytest

import devmm
import devmm.integrations.numpy
import devmm.testing
from devmm.mrs.cpu import BytearrayMemoryResource, MallocMemoryResource, NumpyHandlerMemoryResource

HOST_RESOURCES: list[Callable[[], devmm.DeviceMemoryResource]] = [
    MallocMemoryResource,
    BytearrayMemoryResource,
    NumpyHandlerMemoryResource,
]
ADAPTORS: list[Callable[[devmm.DeviceMemoryResource], devmm.DeviceMemoryResource]] = [
    lambda mr: mr,
    devmm.StatisticsAdaptor,
    lambda mr: devmm.LimitingAdaptor(mr, limit_bytes=1 << 20),
    devmm.LoggingAdaptor,
]


@pytest.mark.parametrize("adapt", ADAPTORS, ids=["bare", "statistics", "limiting", "logging"])
@pytest.mark.parametrize("factory", HOST_RESOURCES, ids=lambda f: f.__name__)
def test_every_host_resource_detects_misuse_through_every_adaptor(
    factory: Callable[[], devmm.DeviceMemoryResource],
    adapt: Callable[[devmm.DeviceMemoryResource], devmm.DeviceMemoryResource],
    stream: devmm.Stream,
) -> None:
    mr = adapt(factory())
    p = mr.allocate(64, stream)
    assert mr._debug_live_count() == 1
    with pytest.raises(ValueError, match="never allocated"):
        mr.deallocate(p + 8, 64, stream)
    foreign = ctypes.create_string_buffer(64)
    with pytest.raises(ValueError, match="never allocated"):
        mr.deallocate(ctypes.addressof(foreign), 64, stream)
    with pytest.raises(ValueError, match="wrong size"):
        mr.deallocate(p, 32, stream)
    assert mr._debug_live_count() == 1
    mr.deallocate(p, 64, stream)
    assert mr._debug_live_count() == 0
    with pytest.raises(ValueError, match="double-free"):
        mr.deallocate(p, 64, stream)
    assert mr._debug_live_count() == 0


def test_numpy_handler_resource_never_hands_one_block_out_twice(stream: devmm.Stream) -> None:
    mr = NumpyHandlerMemoryResource()
    p = mr.allocate(4096, stream)
    mr.deallocate(p, 4096, stream)
    with pytest.raises(ValueError, match="double-free"):
        mr.deallocate(p, 4096, stream)
    # Had the double free reached NumPy's cache, two blocks would coincide.
    a, b = mr.allocate(4096, stream), mr.allocate(4096, stream)
    assert a != b
    mr.deallocate(a, 4096, stream)
    mr.deallocate(b, 4096, stream)


def fake_huge_resource(freed: list[int]) -> devmm.CallbackMemoryResource:
    """Hands out made-up addresses for any size, recording what is freed."""
    addresses = iter(range(1 << 20, 1 << 40, 1 << 12))
    return devmm.CallbackMemoryResource(lambda n, s: next(addresses), lambda p, n, s: freed.append(p))


def test_statistics_counter_overflow_is_a_typed_error_and_returns_the_memory(stream: devmm.Stream) -> None:
    freed: list[int] = []
    stats = devmm.StatisticsAdaptor(fake_huge_resource(freed))
    first = stats.allocate(2**63, stream)
    with pytest.raises(MemoryError, match="would overflow the current_bytes counter") as raised:
        stats.allocate(2**63, stream)
    assert "StatisticsAdaptor" in str(raised.value)
    assert len(freed) == 1 and freed[0] != first  # the second block went back upstream
    assert (stats.current_bytes, stats.allocations) == (2**63, 1)
    stats.deallocate(first, 2**63, stream)
    assert stats.current_bytes == 0


@pytest.mark.parametrize("wrap", ["statistics", "limiting"])
def test_wrong_size_free_through_a_counting_adaptor_leaves_the_counters_exact(
    wrap: str, stream: devmm.Stream
) -> None:
    stats = devmm.StatisticsAdaptor(MallocMemoryResource())
    limiting = devmm.LimitingAdaptor(stats, limit_bytes=1024)
    mr = stats if wrap == "statistics" else limiting
    p = mr.allocate(64, stream)
    with pytest.raises(ValueError, match="wrong size"):
        mr.deallocate(p, 32, stream)
    assert (stats.current_bytes, stats.deallocations, limiting.used_bytes) == (
        64,
        0,
        64 if wrap == "limiting" else 0,
    )
    mr.deallocate(p, 64, stream)
    assert (stats.current_bytes, limiting.used_bytes) == (0, 0)


CHAINS: dict[str, Callable[[], devmm.DeviceMemoryResource]] = {
    "malloc": MallocMemoryResource,
    "bytearray": BytearrayMemoryResource,
    "numpy": NumpyHandlerMemoryResource,
    "recording": devmm.testing.RecordingMemoryResource,
    "callback": lambda: devmm.CallbackMemoryResource(lambda n, s: 0, lambda p, n, s: None),
    "statistics": lambda: devmm.StatisticsAdaptor(MallocMemoryResource()),
    "limiting": lambda: devmm.LimitingAdaptor(MallocMemoryResource(), 64),
    "logging": lambda: devmm.LoggingAdaptor(MallocMemoryResource()),
}


@pytest.mark.parametrize("name", CHAINS)
def test_freeing_null_is_one_rule_everywhere(name: str, stream: devmm.Stream) -> None:
    mr = CHAINS[name]()
    mr.deallocate(0, 0, stream)  # what a zero-byte allocation may return
    # The testing double reports every misuse as its own RecordingMisuseError
    # (an AssertionError, so a test fails), as the seed's testing kit does.
    refusal = devmm.testing.RecordingMisuseError if name == "recording" else ValueError
    with pytest.raises(refusal, match="never allocated"):
        mr.deallocate(0, 16, stream)
    assert mr._debug_live_count() in (0, None)


def test_a_failed_free_leaves_the_buffer_live_for_a_retry() -> None:
    calls: list[int] = []
    storage = ctypes.create_string_buffer(128)
    aligned = ctypes.addressof(storage)

    def dealloc(ptr: int, nbytes: int, stream: Any) -> None:
        calls.append(ptr)
        if len(calls) == 1:
            raise OSError("the allocator is busy")

    mr = devmm.CallbackMemoryResource(lambda n, s: aligned, dealloc)
    buf = devmm.DeviceBuffer(64, mr=mr)
    with pytest.raises(OSError, match="busy") as raised:
        buf.free()
    assert any("still live" in note and "free()" in note for note in getattr(raised.value, "__notes__", []))
    assert not buf.closed
    buf.free()
    assert buf.closed and calls == [aligned, aligned]
    buf.free()  # idempotent once released
    assert len(calls) == 2


class CudaByProperty(devmm.DeviceMemoryResource):
    @property
    def device(self) -> devmm.Device:  # type: ignore[override]
        return devmm.Device.from_string("cuda:0")

    def allocate(self, nbytes: int, stream: Any = None) -> int:
        raise AssertionError("never called")

    def deallocate(self, ptr: int, nbytes: int, stream: Any = None) -> None:
        raise AssertionError("never called")


def test_a_subclass_device_property_is_the_device_it_is_served_on() -> None:
    with pytest.raises(ValueError, match="cuda:0 cannot back NumPy"):
        devmm.integrations.numpy.install(CudaByProperty())


def test_a_subclass_device_that_is_not_a_device_is_refused() -> None:
    class Banana(CudaByProperty):
        device = "banana"  # type: ignore[assignment]

    with pytest.raises(ValueError, match="banana"):
        devmm.DeviceBuffer(8, mr=Banana())
    with pytest.raises(ValueError, match="banana"):
        devmm.integrations.numpy.install(Banana())


def test_host_copies_through_an_undeclared_callback_resource_are_refused() -> None:
    bogus = devmm.CallbackMemoryResource(lambda n, s: 0x1000, lambda p, n, s: None)
    assert bogus.dereferenceable is False
    buf = devmm.DeviceBuffer(64, mr=bogus)
    with pytest.raises(ValueError, match="dereferenceable"):
        buf.copy_from_host(b"x" * 64)
    with pytest.raises(ValueError, match="dereferenceable"):
        buf.copy_to_host()
    buf.free()


def test_host_copies_through_a_declared_callback_resource_work() -> None:
    storage = ctypes.create_string_buffer(64)
    mr = devmm.CallbackMemoryResource(
        lambda n, s: ctypes.addressof(storage), lambda p, n, s: None, dereferenceable=True
    )
    assert mr.dereferenceable is True
    with devmm.DeviceBuffer(8, mr=mr) as buf:
        buf.copy_from_host(b"devmm!!!")
        assert bytes(buf.copy_to_host()) == b"devmm!!!"


def test_a_subclass_declares_dereferenceable_memory() -> None:
    storage = ctypes.create_string_buffer(64)

    class Declared(devmm.DeviceMemoryResource):
        dereferenceable = True

        def allocate(self, nbytes: int, stream: Any = None) -> int:
            return ctypes.addressof(storage)

        def deallocate(self, ptr: int, nbytes: int, stream: Any = None) -> None:
            pass

    class Undeclared(Declared):
        dereferenceable = False

    with devmm.DeviceBuffer(4, mr=Declared()) as buf:
        buf.copy_from_host(b"abcd")
        assert bytes(buf.copy_to_host()) == b"abcd"
    with devmm.DeviceBuffer(4, mr=Undeclared()) as buf:
        with pytest.raises(ValueError, match="dereferenceable"):
            buf.copy_from_host(b"abcd")
    assert MallocMemoryResource().dereferenceable is True
    assert devmm.testing.RecordingMemoryResource().dereferenceable is False
    assert devmm.StatisticsAdaptor(devmm.testing.RecordingMemoryResource()).dereferenceable is False


def test_numpy_refuses_a_resource_whose_pointers_are_not_memory() -> None:
    with pytest.raises(ValueError, match="dereferenceable"):
        devmm.integrations.numpy.install(devmm.testing.RecordingMemoryResource())
    with pytest.raises(ValueError, match="dereferenceable"):
        devmm.integrations.numpy.install(
            devmm.StatisticsAdaptor(devmm.CallbackMemoryResource(lambda n, s: 0x1000, lambda p, n, s: None))
        )
    assert np.ones(1000).sum() == 1000.0


def test_keyboard_interrupt_in_a_logging_handler_reaches_the_caller(stream: devmm.Stream) -> None:
    class Interrupting(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            raise KeyboardInterrupt

    logger = logging.getLogger("devmm.mr")
    handler = Interrupting()
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    stats = devmm.StatisticsAdaptor(MallocMemoryResource())
    mr = devmm.LoggingAdaptor(stats)
    try:
        with pytest.raises(KeyboardInterrupt):
            mr.allocate(64, stream)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    # The allocation the interrupt cut short was given back, not leaked.
    assert stats.current_bytes == 0


def test_messages_name_python_things() -> None:
    with pytest.raises(ValueError) as raised:
        devmm.runtime_for("cpu").default_stream(devmm.Device.from_string("cpu:1"))
    assert "Device::CPU" not in str(raised.value) and "cpu:0" in str(raised.value)
    with pytest.raises(MemoryError) as too_big:
        BytearrayMemoryResource().allocate(2**63 + 5)
    assert "SystemError" not in str(too_big.value) and "PyByteArray" not in str(too_big.value)

    class Mine(devmm.DeviceMemoryResource):
        def allocate(self, nbytes: int, stream: Any = None) -> int:
            return 0

        def deallocate(self, ptr: int, nbytes: int, stream: Any = None) -> None:
            pass

    with pytest.raises(MemoryError) as null:
        devmm.DeviceBuffer(8, mr=Mine())
    assert "Mine" in str(null.value) and "CallbackMemoryResource" not in str(null.value)


def test_a_resource_holding_its_own_buffer_is_collected() -> None:
    storage = ctypes.create_string_buffer(64)

    class Holding(devmm.DeviceMemoryResource):
        def allocate(self, nbytes: int, stream: Any = None) -> int:
            return ctypes.addressof(storage)

        def deallocate(self, ptr: int, nbytes: int, stream: Any = None) -> None:
            pass

    mr = Holding()
    mr.buffer = devmm.DeviceBuffer(8, mr=mr)  # type: ignore[attr-defined]
    mr.tensor = devmm.empty((2,), "int8", mr=mr)  # type: ignore[attr-defined]
    alive = weakref.ref(mr)
    del mr
    gc.collect()
    assert alive() is None


class _Pool(devmm.DeviceMemoryResource):
    """Hands out ctypes blocks it keeps, and records what comes back: its
    `deallocate` needs the object whole (its attributes)."""

    def __init__(self) -> None:
        self.blocks: dict[int, Any] = {}
        self.freed: list[int] = []

    def allocate(self, nbytes: int, stream: Any = None) -> int:
        block = ctypes.create_string_buffer(max(nbytes, 1))
        self.blocks[ctypes.addressof(block)] = block
        return ctypes.addressof(block)

    def deallocate(self, ptr: int, nbytes: int, stream: Any = None) -> None:
        del self.blocks[ptr]
        self.freed.append(ptr)


def test_a_collected_cycle_gives_its_memory_back_through_the_whole_resource(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The collector clears weak references, then runs finalizers, then
    # breaks the cycle: the buffers' memory goes back in the second step,
    # through the resource's own `deallocate`, while its attributes exist.
    mr = _Pool()
    blocks, freed = mr.blocks, mr.freed
    mr.tensor = devmm.empty((4,), "float32", mr=mr)  # type: ignore[attr-defined]
    mr.buffer = devmm.DeviceBuffer(16, mr=mr)  # type: ignore[attr-defined]
    mr.viewed = devmm.empty((2,), "int8", mr=mr)  # type: ignore[attr-defined]
    mr.viewed.buffer  # type: ignore[attr-defined]  # made, and held by the tensor alone
    given = set(blocks)
    assert len(given) == 3
    alive = weakref.ref(mr)
    del mr
    with caplog.at_level(logging.DEBUG, logger="devmm"):
        gc.collect()
    assert alive() is None
    assert sorted(freed) == sorted(given) and not blocks, "each block came back once"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize("holder", ["buffer", "tensor"])
def test_a_failed_deallocate_in_a_collected_cycle_is_called_once(
    holder: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The finalizer and the cycle's clear both release through the
    # resource, and then the object drops: with the first release failing,
    # a second would free the same pointer twice. The tries are counted
    # outside the resource, whose attributes the collector clears.
    deallocated: list[int] = []

    class FailingPool(devmm.DeviceMemoryResource):
        """A driver that freed the memory and then reported an earlier error."""

        def allocate(self, nbytes: int, stream: Any = None) -> int:
            return 0x4000

        def deallocate(self, ptr: int, nbytes: int, stream: Any = None) -> None:
            deallocated.append(ptr)
            raise RuntimeError("an earlier asynchronous error")

    mr = FailingPool()
    if holder == "buffer":
        mr.held = devmm.DeviceBuffer(16, mr=mr)  # type: ignore[attr-defined]
    else:
        mr.held = devmm.empty((4,), "float32", mr=mr)  # type: ignore[attr-defined]
    alive = weakref.ref(mr)
    del mr
    with caplog.at_level(logging.ERROR, logger="devmm"):
        gc.collect()
    assert alive() is None
    assert deallocated == [0x4000], "deallocate is called exactly once"
    messages = [r.getMessage() for r in caplog.records]
    assert any("given up" in m and "earlier asynchronous error" in m for m in messages), messages


class _FailingOnce(devmm.DeviceMemoryResource):
    """A driver that freed the memory and then reported an earlier error,
    once: a second `deallocate` of the pointer would free it twice. The
    calls are counted outside the resource, whose attributes the collector
    clears."""

    def __init__(self, calls: list[int]) -> None:
        self.calls = calls

    def allocate(self, nbytes: int, stream: Any = None) -> int:
        return 0x5000

    def deallocate(self, ptr: int, nbytes: int, stream: Any = None) -> None:
        self.calls.append(ptr)
        if len(self.calls) == 1:
            raise RuntimeError("an earlier asynchronous error")


@pytest.mark.parametrize("holder", ["buffer", "tensor"])
@pytest.mark.parametrize("path", ["del", "cycle"])
def test_a_failed_free_is_the_only_deallocate_when_the_object_goes(
    holder: str, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The caller saw the error and did not retry: neither the reference
    # count reaching zero nor the collector breaking a cycle may
    # deallocate the pointer again; the memory is given up, logged.
    calls: list[int] = []
    mr = _FailingOnce(calls)
    held: Any = devmm.DeviceBuffer(16, mr=mr) if holder == "buffer" else devmm.empty((4,), "float32", mr=mr)
    buffer = held if holder == "buffer" else held.buffer
    with pytest.raises(RuntimeError, match="earlier asynchronous error"):
        buffer.free()
    del buffer
    if path == "cycle":
        mr.held = held  # type: ignore[attr-defined]  # mr -> held -> mr
    alive = weakref.ref(mr)
    del mr, held
    with caplog.at_level(logging.ERROR, logger="devmm"):
        gc.collect()
    assert alive() is None
    assert calls == [0x5000], "deallocate is called exactly once"
    assert any("given up" in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]


def test_a_tensor_collected_while_its_buffer_object_lives_leaves_the_memory_to_it() -> None:
    # The tensor is garbage (reachable only from a dead cycle), but its
    # `buffer` object is not: the collector must not free memory the
    # buffer's holder still reads.
    mr = _Pool()
    tensor = devmm.empty((4,), "float32", mr=mr)
    buffer = tensor.buffer
    cycle: list[Any] = [tensor]
    cycle.append(cycle)
    del tensor, cycle
    gc.collect()
    assert not buffer.closed and len(mr.blocks) == 1
    buffer.free()
    assert not mr.blocks


def test_a_python_resource_goes_with_its_last_reference_once_its_memory_is_back() -> None:
    gc.disable()
    try:
        mr = _Pool()
        buffer = devmm.DeviceBuffer(16, mr=mr)
        alive = weakref.ref(mr)
        del mr
        assert alive() is not None, "a live buffer holds its resource"
        buffer.free()
        del buffer
        assert alive() is None, "freed by its reference count, with no collection"
    finally:
        gc.enable()


def test_a_callback_resource_whose_closure_holds_it_is_collected() -> None:
    storage = ctypes.create_string_buffer(64)
    holder: dict[str, Any] = {}

    def alloc(nbytes: int, stream: Any) -> int:
        assert holder["mr"] is not None
        return ctypes.addressof(storage)

    mr = devmm.CallbackMemoryResource(alloc, lambda p, n, s: holder.clear())
    holder["mr"] = mr
    holder["stats"] = devmm.StatisticsAdaptor(mr)
    holder["buffer"] = devmm.DeviceBuffer(8, mr=mr)
    alive = weakref.ref(mr)
    del mr, holder, alloc
    gc.collect()
    assert alive() is None


def test_numpy_installer_takes_part_in_the_collector() -> None:
    class Holding(devmm.DeviceMemoryResource):
        dereferenceable = True

        def __init__(self) -> None:
            self.inner = MallocMemoryResource()

        def allocate(self, nbytes: int, stream: Any = None) -> int:
            return self.inner.allocate(nbytes, stream)

        def deallocate(self, ptr: int, nbytes: int, stream: Any = None) -> None:
            self.inner.deallocate(ptr, nbytes, stream)

    mr = Holding()
    mr.installer = devmm.integrations.numpy.install(mr)  # type: ignore[attr-defined]
    assert np.arange(10).sum() == 45
    mr.installer.uninstall()  # type: ignore[attr-defined]
    alive = weakref.ref(mr)
    del mr
    gc.collect()
    assert alive() is None
