"""Memory resources, adaptors, Python-defined resources."""

import ctypes
import logging
from typing import Any

import pytest

import devmm
from devmm.mrs.cpu import BytearrayMemoryResource, MallocMemoryResource, NumpyHandlerMemoryResource


def write_read(ptr: int, payload: bytes) -> bytes:
    ctypes.memmove(ptr, payload, len(payload))
    return ctypes.string_at(ptr, len(payload))


@pytest.mark.parametrize("factory", [MallocMemoryResource, BytearrayMemoryResource, NumpyHandlerMemoryResource])
def test_host_resources_hand_out_aligned_writable_memory(factory: Any, stream: devmm.Stream) -> None:
    mr = factory()
    align = mr.guaranteed_alignment()
    ptrs = [mr.allocate(n, stream) for n in (1, 100, 4096)]
    assert all(p % align == 0 for p in ptrs)
    assert len(set(ptrs)) == 3
    assert write_read(ptrs[1], b"x" * 100) == b"x" * 100
    for p, n in zip(ptrs, (1, 100, 4096)):
        mr.deallocate(p, n, stream)
    assert mr.allocate(0, stream) == 0
    mr.deallocate(0, 0, stream)
    assert mr.device == devmm.Device.from_string("cpu")
    assert not mr.stream_ordered
    free, total = mr.available_memory()
    assert 0 < free <= total


def test_resource_reprs() -> None:
    assert repr(MallocMemoryResource(alignment=128)) == "MallocMemoryResource(device=cpu:0, alignment=128)"
    assert repr(BytearrayMemoryResource()) == "BytearrayMemoryResource(device=cpu:0, alignment=1)"
    stats = devmm.StatisticsAdaptor(MallocMemoryResource())
    limited = devmm.LimitingAdaptor(stats, limit_bytes=10)
    # The seed's adaptor reprs: Name(upstream=...), the limit first.
    assert repr(limited) == (
        "LimitingAdaptor(limit_bytes=10, upstream=StatisticsAdaptor(upstream=MallocMemoryResource(device=cpu:0, alignment=64)))"
    )
    assert repr(devmm.LoggingAdaptor(stats)).startswith("LoggingAdaptor(upstream=StatisticsAdaptor(upstream=")
    assert limited.upstream is stats
    # The seed's callback repr names the device only; errors name the alignment too.
    callback = devmm.CallbackMemoryResource(lambda n, s: 0, lambda p, n, s: None, device="cpu", alignment=16)
    assert repr(callback) == "CallbackMemoryResource(device=cpu:0)"


@pytest.mark.parametrize("alignment", [48, 0, 3, -1, -64, 2**70])
@pytest.mark.parametrize("make", [MallocMemoryResource, BytearrayMemoryResource])
def test_an_alignment_must_be_a_power_of_two(make: Any, alignment: int) -> None:
    # Negative and huge ints too: the rule they break is the same.
    with pytest.raises(ValueError, match="alignment must be a power of two"):
        make(alignment=alignment)


def test_bytearray_resource_detects_misuse(stream: devmm.Stream) -> None:
    mr = BytearrayMemoryResource()
    p = mr.allocate(32, stream)
    assert mr._debug_live_count() == 1
    with pytest.raises(ValueError, match="wrong size"):
        mr.deallocate(p, 16, stream)
    with pytest.raises(ValueError, match="never allocated"):
        mr.deallocate(p + 64, 32, stream)
    mr.deallocate(p, 32, stream)
    with pytest.raises(ValueError, match="double-free"):
        mr.deallocate(p, 32, stream)
    assert mr._debug_live_count() == 0


def test_statistics_adaptor_counts(stream: devmm.Stream) -> None:
    stats = devmm.StatisticsAdaptor(MallocMemoryResource())
    a = stats.allocate(100, stream)
    b = stats.allocate(50, stream)
    assert (stats.current_bytes, stats.peak_bytes, stats.total_bytes) == (150, 150, 150)
    stats.deallocate(a, 100, stream)
    c = stats.allocate(10, stream)
    assert (stats.current_bytes, stats.peak_bytes, stats.total_bytes) == (60, 150, 160)
    stats.deallocate(b, 50, stream)
    stats.deallocate(c, 10, stream)
    assert (stats.allocations, stats.deallocations, stats.current_bytes) == (3, 3, 0)


def test_limiting_adaptor_raises_memory_error_naming_the_chain(stream: devmm.Stream) -> None:
    limited = devmm.LimitingAdaptor(devmm.StatisticsAdaptor(MallocMemoryResource()), limit_bytes=64)
    p = limited.allocate(64, stream)
    assert limited.used_bytes == 64 and limited.limit_bytes == 64
    with pytest.raises(MemoryError, match=r"would exceed the 64-byte limit \(64 bytes in use\)") as info:
        limited.allocate(1, stream)
    assert "LimitingAdaptor -> StatisticsAdaptor -> MallocMemoryResource" in str(info.value)
    limited.deallocate(p, 64, stream)
    limited.deallocate(limited.allocate(64, stream), 64, stream)


def test_logging_adaptor_emits_structured_records(caplog: pytest.LogCaptureFixture, stream: devmm.Stream) -> None:
    mr = devmm.LoggingAdaptor(BytearrayMemoryResource())
    with caplog.at_level(logging.INFO, logger="devmm.mr"):
        p = mr.allocate(16, stream)
        mr.deallocate(p, 16, stream)
        with pytest.raises(ValueError):
            mr.deallocate(p, 16, stream)
    records = [r for r in caplog.records if r.name == "devmm.mr"]
    assert [(r.op, r.levelname) for r in records] == [  # type: ignore[attr-defined]
        ("allocate", "INFO"),
        ("deallocate", "INFO"),
        ("deallocate", "WARNING"),
    ]
    first = records[0]
    assert (first.ptr, first.nbytes, first.stream, first.device) == (p, 16, 0, "cpu:0")  # type: ignore[attr-defined]
    assert "double-free" in records[2].error  # type: ignore[attr-defined]
    # The seed's message: the operation, then device, nbytes, ptr, stream.
    assert records[0].getMessage() == f"allocate device=cpu:0 nbytes=16 ptr={p:#x} stream=0"
    assert records[1].getMessage() == f"deallocate device=cpu:0 nbytes=16 ptr={p:#x} stream=0"


def test_logging_adaptor_writes_to_the_logger_it_is_given(caplog: pytest.LogCaptureFixture, stream: devmm.Stream) -> None:
    # The seed's LoggingAdaptor(upstream, logger=None): records go to `logger` instead of devmm.mr.
    mine = logging.getLogger("tests.my_allocations")
    mr = devmm.LoggingAdaptor(MallocMemoryResource(), mine)
    assert devmm.LoggingAdaptor(MallocMemoryResource(), logger=None).upstream is not None
    with caplog.at_level(logging.INFO):
        mr.deallocate(mr.allocate(16, stream), 16, stream)
    assert [(r.name, r.op) for r in caplog.records] == [  # type: ignore[attr-defined]
        ("tests.my_allocations", "allocate"),
        ("tests.my_allocations", "deallocate"),
    ]
    with pytest.raises(TypeError, match="logging.Logger"):
        devmm.LoggingAdaptor(MallocMemoryResource(), "tests.my_allocations")


def test_logging_adaptor_writes_to_a_logger_outside_the_manager_or_an_adapter(stream: devmm.Stream) -> None:
    # As the seed's, the logger is used as given: one logging.getLogger does
    # not know, or a LoggerAdapter, gets the records.
    class Collect(logging.Handler):
        def __init__(self) -> None:
            super().__init__(logging.DEBUG)
            self.records: list[logging.LogRecord] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.records.append(record)

    unregistered = logging.Logger("tests.unregistered", logging.INFO)
    handler = Collect()
    unregistered.addHandler(handler)
    # The name's registered logger is another object and must get nothing.
    registered = logging.getLogger("tests.unregistered")
    registered_handler = Collect()
    registered.addHandler(registered_handler)
    try:
        mr = devmm.LoggingAdaptor(MallocMemoryResource(), unregistered)
        mr.deallocate(mr.allocate(16, stream), 16, stream)
        assert [r.op for r in handler.records] == ["allocate", "deallocate"]  # type: ignore[attr-defined]
        assert registered_handler.records == []

        handler.records.clear()
        adapter = logging.LoggerAdapter(unregistered, {"who": "adapter"})
        mr = devmm.LoggingAdaptor(MallocMemoryResource(), adapter)  # type: ignore[arg-type]
        mr.deallocate(mr.allocate(8, stream), 8, stream)
        # A LoggerAdapter puts its own extra on the records (Python < 3.13 drops the call's).
        assert [(r.getMessage().split()[0], r.who) for r in handler.records] == [  # type: ignore[attr-defined]
            ("allocate", "adapter"),
            ("deallocate", "adapter"),
        ]
        del mr
    finally:
        registered.removeHandler(registered_handler)


def test_a_logging_adaptors_logger_is_let_go_with_the_adaptor(stream: devmm.Stream) -> None:
    import gc
    import weakref

    given = logging.Logger("tests.let_go")
    gone = weakref.ref(given)
    mr = devmm.LoggingAdaptor(MallocMemoryResource(), given)
    del given
    gc.collect()
    assert gone() is not None  # the adaptor's records still go to it
    del mr
    # Loggers of adaptors gone are let go when the next one is registered.
    devmm.LoggingAdaptor(MallocMemoryResource(), logging.Logger("tests.next"))
    gc.collect()
    assert gone() is None


def test_logging_adaptor_is_silent_when_the_logger_is_off(caplog: pytest.LogCaptureFixture, stream: devmm.Stream) -> None:
    mr = devmm.LoggingAdaptor(MallocMemoryResource())
    with caplog.at_level(logging.WARNING, logger="devmm.mr"):
        mr.deallocate(mr.allocate(8, stream), 8, stream)
    assert not [r for r in caplog.records if r.name == "devmm.mr"]


class PyHeap(devmm.DeviceMemoryResource):
    """A resource written in Python: bytearrays keyed by address."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks: dict[int, bytearray] = {}
        self.calls: list[tuple[str, int]] = []

    def allocate(self, nbytes: int, stream: Any = None) -> int:
        if nbytes > 1 << 20:
            raise MemoryError(f"PyHeap will not hold {nbytes} bytes")
        block = bytearray(nbytes + 64)
        addr = ctypes.addressof((ctypes.c_char * len(block)).from_buffer(block))
        aligned = (addr + 63) & ~63
        self.blocks[aligned] = block
        self.calls.append(("allocate", nbytes))
        return aligned

    def deallocate(self, ptr: int, nbytes: int, stream: Any = None) -> None:
        del self.blocks[ptr]
        self.calls.append(("deallocate", nbytes))

    def guaranteed_alignment(self) -> int:
        return 64


def test_python_subclass_backs_tensors_and_adaptors() -> None:
    heap = PyHeap()
    stats = devmm.StatisticsAdaptor(heap)
    t = devmm.empty((4, 4), "float32", layout=devmm.RowMajor(), mr=stats)
    assert t.buffer.ptr in heap.blocks
    assert stats.current_bytes == 64
    t.buffer.free()
    assert heap.calls == [("allocate", 64), ("deallocate", 64)]
    assert heap.blocks == {} and stats.current_bytes == 0


def test_python_exceptions_come_back_unchanged() -> None:
    heap = PyHeap()
    with pytest.raises(MemoryError, match="PyHeap will not hold"):
        devmm.empty((1 << 21,), "uint8", mr=devmm.StatisticsAdaptor(heap))
    with pytest.raises(KeyError):
        heap.deallocate(12345, 1)
    buf = devmm.DeviceBuffer(8, mr=heap)
    del heap.blocks[buf.ptr]
    with pytest.raises(KeyError):
        buf.free()


def test_python_subclass_sets_its_device() -> None:
    heap = PyHeap()
    heap.device = "cuda_host:0"
    assert heap.device == devmm.Device.from_string("cuda_host:0")
    with pytest.raises(AttributeError, match="fixed"):
        MallocMemoryResource().device = "cpu"  # type: ignore[misc]


def test_base_class_is_abstract_until_allocate_and_deallocate_are_overridden() -> None:
    class Incomplete(devmm.DeviceMemoryResource):
        pass

    class HalfDone(devmm.DeviceMemoryResource):
        def allocate(self, nbytes: int, stream: Any = None) -> int:
            return 0

    with pytest.raises(TypeError, match="abstract class Incomplete with abstract methods allocate, deallocate"):
        Incomplete()
    with pytest.raises(TypeError, match="abstract class HalfDone with abstract methods deallocate"):
        HalfDone()
    with pytest.raises(TypeError, match="abstract class DeviceMemoryResource"):
        devmm.DeviceMemoryResource()


def test_a_python_resource_inherits_the_seeds_probe_defaults() -> None:
    # The seed's DeviceMemoryResource: not stream-ordered, alignment 1, and
    # available_memory() None (the resource cannot tell) until overridden.
    heap = PyHeap()
    assert (heap.stream_ordered, heap.available_memory()) == (False, None)
    assert devmm.DeviceMemoryResource.guaranteed_alignment(heap) == 1


def test_base_class_methods_raise_when_a_subclass_calls_them(stream: devmm.Stream) -> None:
    class Delegating(devmm.DeviceMemoryResource):
        def allocate(self, nbytes: int, stream: Any = None) -> int:
            return super().allocate(nbytes, stream)

        def deallocate(self, ptr: int, nbytes: int, stream: Any = None) -> None:
            super().deallocate(ptr, nbytes, stream)

    with pytest.raises(NotImplementedError, match="Delegating must override allocate"):
        Delegating().allocate(8, stream)
    with pytest.raises(NotImplementedError):
        devmm.empty((2,), "uint8", mr=Delegating())


def test_resources_are_weak_referenceable() -> None:
    import gc
    import weakref

    makers: list[Any] = [MallocMemoryResource, BytearrayMemoryResource, PyHeap, lambda: devmm.StatisticsAdaptor(PyHeap())]
    for make in makers:
        mr = make()
        ref = weakref.ref(mr)
        assert ref() is mr
        del mr
        gc.collect()
        assert ref() is None


def test_callback_resource(stream: devmm.Stream) -> None:
    heap = PyHeap()
    seen: list[Any] = []

    def alloc(nbytes: int, s: devmm.Stream) -> int:
        seen.append(s)
        return heap.allocate(nbytes)

    mr = devmm.CallbackMemoryResource(alloc, heap.deallocate, "cpu", alignment=64)
    assert mr.guaranteed_alignment() == 64
    p = mr.allocate(10, stream)
    assert p % 64 == 0 and seen == [stream]
    mr.deallocate(p, 10, stream)
    assert heap.blocks == {}


def test_callback_resource_refuses_misaligned_pointers(stream: devmm.Stream) -> None:
    heap = PyHeap()
    mr = devmm.CallbackMemoryResource(lambda n, s: heap.allocate(n) + 1, lambda p, n, s: heap.deallocate(p - 1, n), alignment=8)
    with pytest.raises(ValueError, match="not aligned to the promised 8 bytes"):
        mr.allocate(16, stream)
    assert heap.blocks == {}  # the misaligned block was given back


def test_numpy_handler_resource_wraps_numpys_allocator(stream: devmm.Stream) -> None:
    mr = NumpyHandlerMemoryResource()
    assert repr(mr) == "NumpyHandlerMemoryResource(device=cpu:0, handler='default_allocator')"

    class Named(NumpyHandlerMemoryResource):
        pass

    assert repr(Named()) == "Named(device=cpu:0, handler='default_allocator')"
    t = devmm.empty((3, 3), "float64", mr=mr)
    assert t.buffer.mr is mr
    t.buffer.free()


def test_callback_resource_refuses_bad_alignment_and_null_pointers(stream: devmm.Stream) -> None:
    with pytest.raises(ValueError, match="power of two|power-of-two"):
        devmm.CallbackMemoryResource(lambda n, s: 0, lambda p, n, s: None, alignment=48)
    null = devmm.CallbackMemoryResource(lambda n, s: 0, lambda p, n, s: None)
    with pytest.raises(MemoryError, match="null pointer"):
        null.allocate(8, stream)
    with pytest.raises(MemoryError, match="null pointer"):
        devmm.DeviceBuffer(8, mr=null)
    assert null.allocate(0, stream) == 0


@pytest.mark.parametrize("bad", [-1, 2**64])
def test_negative_or_oversized_integer_arguments_are_value_errors_naming_them(bad: int, stream: devmm.Stream) -> None:
    import devmm.testing

    cpu = devmm.Device.from_string("cpu")
    buf = devmm.DeviceBuffer(8, stream=stream)
    layout = devmm.Layout((2,), (1,), "float32")
    calls: dict[str, Any] = {
        "nbytes": lambda: devmm.DeviceBuffer(bad),
        "size": lambda: devmm.DeviceBuffer(size=bad),
        "limit_bytes": lambda: devmm.LimitingAdaptor(MallocMemoryResource(), limit_bytes=bad),
        "alignment": lambda: MallocMemoryResource(alignment=bad),
        "guaranteed_alignment": lambda: devmm.testing.RecordingMemoryResource(guaranteed_alignment=bad),
        "unit_stride_alignment": lambda: devmm.Aligned(devmm.RowMajor(), bad, 1),
        "base_alignment": lambda: devmm.Layout((2,), (1,), "float32", base_alignment=bad),
        "itemsize": lambda: layout.validate((2,), bad),
        "offset": lambda: devmm.Tensor(buf, "float32", (2,), layout, offset=bad),
        "handle": lambda: devmm.runtime_for(cpu).wrap_stream(cpu, bad),
        "index": lambda: devmm.Device(devmm.DeviceType.CUDA, bad),
        "shape": lambda: devmm.empty((bad,), "float32"),
    }
    for name, call in calls.items():
        with pytest.raises(ValueError, match=f"^{name} (extents )?must") as info:
            call()
        assert not isinstance(info.value, OverflowError), name
    with pytest.raises(ValueError, match="^handle must"):
        stream.wait_raw(bad)


@pytest.mark.parametrize("factory", [MallocMemoryResource, BytearrayMemoryResource, NumpyHandlerMemoryResource])
def test_host_resources_take_the_cpu_device_first(factory: Any, cpu: devmm.Device) -> None:
    # The seed's constructors: (device=Device(CPU), *, alignment=...).
    assert factory(cpu).device == cpu
    assert factory(device=cpu).device == cpu
    with pytest.raises(ValueError, match="cpu"):
        factory(devmm.Device.from_string("cuda:0"))


@pytest.mark.parametrize("factory", [MallocMemoryResource, BytearrayMemoryResource])
def test_host_resource_alignment_is_keyword_only(factory: Any, cpu: devmm.Device, stream: devmm.Stream) -> None:
    with pytest.raises(TypeError):
        factory(cpu, 64)
    mr = factory(cpu, alignment=128)
    # Malloc promises what it delivers; the bytearray resource, as the
    # seed's, delivers it and promises 1.
    assert mr.guaranteed_alignment() == (128 if factory is MallocMemoryResource else 1)
    ptr = mr.allocate(8, stream)
    assert ptr % 128 == 0
    mr.deallocate(ptr, 8, stream)


@pytest.mark.parametrize("alignment", [1, 2, 4, 8, 4096])
def test_malloc_takes_every_power_of_two_alignment(alignment: int, stream: devmm.Stream) -> None:
    mr = MallocMemoryResource(alignment=alignment)
    assert mr.guaranteed_alignment() == alignment
    assert repr(mr) == f"MallocMemoryResource(device=cpu:0, alignment={alignment})"
    ptrs = [mr.allocate(n, stream) for n in (1, 3, 17)]
    assert all(p % alignment == 0 for p in ptrs)
    for p, n in zip(ptrs, (1, 3, 17)):
        mr.deallocate(p, n, stream)


def test_bytearray_resource_promises_no_alignment_by_default(stream: devmm.Stream) -> None:
    mr = BytearrayMemoryResource()
    assert repr(mr) == "BytearrayMemoryResource(device=cpu:0, alignment=1)"
    assert mr.guaranteed_alignment() == 1
    p = mr.allocate(3, stream)
    assert write_read(p, b"abc") == b"abc"
    mr.deallocate(p, 3, stream)


def test_host_resource_signatures_show_their_defaults() -> None:
    import inspect

    import devmm.testing

    assert str(inspect.signature(MallocMemoryResource)) == "(device=None, *, alignment=64)"
    assert str(inspect.signature(BytearrayMemoryResource)) == "(device=None, *, alignment=1)"
    assert str(inspect.signature(NumpyHandlerMemoryResource)) == "(device=None)"
    assert str(inspect.signature(devmm.testing.RecordingMemoryResource)) == (
        "(device=None, *, stream_ordered=True, guaranteed_alignment=256)"
    )
    assert str(inspect.signature(devmm.CallbackMemoryResource)) == (
        "(alloc_fn, dealloc_fn, device=None, alignment=1, dereferenceable=False)"
    )


def test_a_logger_let_go_may_make_another_logging_adaptor() -> None:
    import subprocess
    import sys

    # A fresh interpreter with a deadline: the registry once released old
    # loggers under its lock, so one whose release made a LoggingAdaptor hung.
    script = """
import gc, logging, devmm
from devmm.mrs.cpu import MallocMemoryResource
made = []
class Releasing(logging.Logger):
    def __del__(self):
        made.append(devmm.LoggingAdaptor(MallocMemoryResource(), logger=logging.Logger("inner")))
first = devmm.LoggingAdaptor(MallocMemoryResource(), logger=Releasing("outer"))
del first
gc.collect()
# Registering the next logger lets the first adaptor's go.
devmm.LoggingAdaptor(MallocMemoryResource(), logger=logging.Logger("next"))
assert len(made) == 1, made
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_bytearray_resource_aligns_pointers_but_promises_nothing(stream: devmm.Stream) -> None:
    # The seed's BytearrayMemoryResource reaches its alignment by offsetting
    # into unaligned storage and keeps the base class's promise of 1.
    mr = BytearrayMemoryResource(alignment=128)
    assert mr.guaranteed_alignment() == 1
    ptrs = [mr.allocate(n, stream) for n in (1, 100, 4096)]
    assert all(p % 128 == 0 for p in ptrs)
    for p, n in zip(ptrs, (1, 100, 4096)):
        mr.deallocate(p, n, stream)
    t = devmm.empty((4,), "float64", layout=devmm.Aligned(devmm.RowMajor(), 8, 256), mr=mr)
    assert t.data_ptr % 256 == 0
    t.free()
    assert mr._debug_live_count() == 0


def test_bytearray_resource_pins_its_blocks_and_releases_them_when_freed(stream: devmm.Stream) -> None:
    import gc
    import weakref

    mr = BytearrayMemoryResource(alignment=64)
    ptr = mr.allocate(100, stream)
    assert list(mr._live) == [ptr]
    block, pin = mr._live[ptr]
    assert isinstance(block, bytearray) and len(block) >= 100
    assert ctypes.addressof(ctypes.c_char.from_buffer(block)) <= ptr
    with pytest.raises(BufferError):
        block.extend(b"moves the storage")  # the pointer must not dangle
    assert pin.obj is block
    died = weakref.ref(block)
    del block, pin
    mr.deallocate(ptr, 100, stream)
    gc.collect()
    assert died() is None and mr._live == {}


@pytest.mark.parametrize(
    ("module", "name", "device"),
    [
        ("cuda", "CudaRuntimeMemoryResource", "cpu"),
        ("cuda", "CudaPinnedMemoryResource", "cuda:0"),
        ("cuda", "CudaManagedMemoryResource", "rocm:0"),
        ("rocm", "HipRuntimeMemoryResource", "cuda:0"),
        ("rocm", "HipPinnedMemoryResource", "rocm:0"),
    ],
)
def test_a_gpu_resource_refuses_a_device_of_another_kind_before_its_driver(module: str, name: str, device: str) -> None:
    # A ValueError naming the mistake, on machines with the driver and without.
    import importlib

    cls = getattr(importlib.import_module(f"devmm.mrs.{module}"), name)
    with pytest.raises(ValueError, match=f"{name} serves .* devices, not {device}"):
        cls(devmm.Device.from_string(device))


def test_adaptors_over_a_python_resource_forward_what_it_says_of_itself() -> None:
    class Ordered(devmm.DeviceMemoryResource):
        def __init__(self) -> None:
            self.blocks: dict[int, Any] = {}

        @property
        def stream_ordered(self) -> bool:
            return True

        def available_memory(self) -> tuple[int, int]:
            return (1 << 20, 1 << 30)

        def allocate(self, nbytes: int, stream: Any = None) -> int:
            block = ctypes.create_string_buffer(max(nbytes, 1))
            self.blocks[ctypes.addressof(block)] = block
            return ctypes.addressof(block)

        def deallocate(self, ptr: int, nbytes: int, stream: Any = None) -> None:
            del self.blocks[ptr]

    stats = devmm.StatisticsAdaptor(Ordered())
    assert stats.stream_ordered is True
    assert stats.available_memory() == (1 << 20, 1 << 30)
    logged = devmm.LoggingAdaptor(devmm.StatisticsAdaptor(Ordered()))
    assert logged.stream_ordered is True and logged.available_memory() == (1 << 20, 1 << 30)

    class Failing(Ordered):
        def available_memory(self) -> tuple[int, int]:
            raise LookupError("no figures")

    with pytest.raises(LookupError, match="no figures"):
        devmm.StatisticsAdaptor(Failing()).available_memory()
