"""Run by test_without_a_gpu_runtime.py in an interpreter whose CUDA runtime
cannot load: resources and streams written in Python serve a CUDA device
there, and the CuPy, rmm and Numba bridges work over them, with those
libraries stood in at each module's seam. Each scenario prints its name
when its assertions hold; anything else is a traceback and a failed run."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import devmm
import devmm.integrations.cupy
import devmm.integrations.numba
import devmm.integrations.rmm
import devmm.mrs.cuda
import devmm.mrs.rocm
from devmm.integrations._support import ForeignHandleStream
from devmm.testing import RecordingMemoryResource

CUDA = devmm.Device(devmm.DeviceType.CUDA, 0)
SCENARIOS: list[Callable[[], None]] = []


def scenario(f: Callable[[], None]) -> Callable[[], None]:
    SCENARIOS.append(f)
    return f


@scenario
def python_resource_and_stream() -> None:
    try:
        devmm.runtime_for(CUDA)
    except devmm.RuntimeUnavailableError:
        pass
    else:
        raise AssertionError("the CUDA runtime loaded")
    mr = RecordingMemoryResource(CUDA)
    stream = ForeignHandleStream(CUDA, 0x50)
    buffer = devmm.DeviceBuffer(64, mr=mr, stream=stream)
    assert buffer.stream is stream and buffer.device == CUDA
    tensor = devmm.empty((4, 2), "float32", mr=mr, stream=stream)
    assert tensor.device == CUDA and tensor.shape == (4, 2)
    padded = tensor.buffer.nbytes  # the device's optimal layout pads rows
    buffer.free()
    del tensor
    gc.collect()
    # The resource was handed the caller's stream object every time.
    assert [(op, nbytes, s) for op, _, nbytes, s in mr.calls] == [
        ("allocate", 64, stream),
        ("allocate", padded, stream),
        ("deallocate", 64, stream),
        ("deallocate", padded, stream),
    ]
    assert mr._debug_live_count() == 0
    # What only the runtime can do (a DLPack export hands off through the
    # stream's runtime) says the runtime is missing, and names it.
    exported = devmm.empty((2,), "int8", mr=mr, stream=stream)
    try:
        exported.__dlpack__()
    except devmm.RuntimeUnavailableError as e:
        assert 'runtime "cuda" is unavailable' in str(e), e
        assert "the ForeignHandleStream stream on cuda:0 needs it" in str(e), e
    else:
        raise AssertionError("a CUDA export ran without the CUDA runtime")


class FakeCupy:
    """The part of CuPy the allocator bridge uses."""

    def __init__(self) -> None:
        self.allocator: Any = "cupy's own"
        self.stream = SimpleNamespace(ptr=0x70)

        class UnownedMemory:
            def __init__(memory, ptr: int, size: int, owner: object, device_id: int) -> None:  # noqa: N805
                memory.ptr, memory.size, memory.owner, memory.device_id = ptr, size, owner, device_id

        class MemoryPointer:
            def __init__(pointer, mem: UnownedMemory, offset: int) -> None:  # noqa: N805
                pointer.mem, pointer.ptr = mem, mem.ptr + offset

        self.alloced: list[int] = []

        def alloc(nbytes: int) -> Any:
            self.alloced.append(nbytes)
            return SimpleNamespace(ptr=0x5000)

        self.cuda = SimpleNamespace(
            alloc=alloc,
            get_allocator=lambda: self.allocator,
            set_allocator=self._set,
            get_current_stream=lambda: self.stream,
            runtime=SimpleNamespace(getDevice=lambda: 0),
            UnownedMemory=UnownedMemory,
            MemoryPointer=MemoryPointer,
            Device=self._entered("device"),
            ExternalStream=self._entered("stream"),
        )
        self.entered: list[tuple[object, ...]] = []

    def _set(self, allocator: Any) -> None:
        self.allocator = allocator

    def _entered(self, what: str) -> Callable[..., Any]:
        @contextlib.contextmanager
        def enter(*args: object) -> Iterator[None]:
            self.entered.append((what, *args))
            yield

        return enter


@scenario
def cupy_allocates_through_a_python_resource() -> None:
    cupy = FakeCupy()
    devmm.integrations.cupy._cupy_module = lambda: cupy
    mr = RecordingMemoryResource(CUDA)
    with devmm.integrations.cupy.install(mr):
        pointer = cupy.allocator(100)
        buffer = pointer.mem.owner.buffer
        assert isinstance(buffer, devmm.DeviceBuffer) and pointer.ptr == buffer.ptr
        assert buffer.stream.handle == 0x70 and pointer.mem.device_id == 0
        assert mr.calls[0][2] == 100 and mr.calls[0][3].handle == 0x70
        del pointer, buffer
        gc.collect()
        assert mr._debug_live_count() == 0
    assert cupy.allocator == "cupy's own"


@scenario
def a_cupy_allocation_keeps_its_stream_until_it_is_freed() -> None:
    # CuPy destroys a stream it made when the stream object is collected,
    # and the allocation's free is queued on that stream: the allocation
    # holds the object until its buffer is freed.
    cupy = FakeCupy()
    mr = RecordingMemoryResource(CUDA)
    live_when_destroyed: list[dict[int, int]] = []

    class Stream:
        ptr = 0x71

        def __del__(self) -> None:
            live_when_destroyed.append(dict(mr.live))

    cupy.stream = Stream()
    devmm.integrations.cupy._cupy_module = lambda: cupy
    with devmm.integrations.cupy.install(mr):
        pointer = cupy.allocator(64)
        cupy.stream = SimpleNamespace(ptr=0x72)  # CuPy moved on to another stream
        gc.collect()
        assert live_when_destroyed == [], live_when_destroyed
        del pointer
        gc.collect()
    assert live_when_destroyed == [{}], live_when_destroyed


@scenario
def a_cupy_allocator_as_a_resource() -> None:
    cupy = FakeCupy()
    devmm.mrs.cuda._cupy_module = lambda: cupy
    handed: list[int] = []

    def allocator(nbytes: int) -> Any:
        handed.append(nbytes)
        return SimpleNamespace(ptr=0x1000 * len(handed))

    mr = devmm.mrs.cuda.CupyAllocatorMemoryResource(allocator, CUDA)
    stream = ForeignHandleStream(CUDA, 0x90)
    buffer = devmm.DeviceBuffer(48, mr=mr, stream=stream)
    assert buffer.ptr == 0x1000 and handed == [48] and mr._debug_live_count() == 1
    # CuPy ran with the device current and devmm's stream as its own.
    assert cupy.entered == [("device", 0), ("stream", 0x90)]
    buffer.free()
    assert mr._debug_live_count() == 0


@scenario
def cupys_current_allocator_as_a_resource() -> None:
    # With no allocator given, the resource allocates through CuPy's own
    # entry point, cupy.cuda.alloc, which calls CuPy's current allocator.
    cupy = FakeCupy()
    devmm.mrs.cuda._cupy_module = lambda: cupy
    mr = devmm.mrs.cuda.CupyAllocatorMemoryResource(device=CUDA)
    buffer = devmm.DeviceBuffer(32, mr=mr, stream=ForeignHandleStream(CUDA, 0xA0))
    assert cupy.alloced == [32] and buffer.ptr == 0x5000
    assert cupy.entered == [("device", 0), ("stream", 0xA0)]
    buffer.free()
    assert mr._debug_live_count() == 0


class FakeRmm:
    """The part of rmm the bridges use: per-device resources and callbacks."""

    def __init__(self) -> None:
        self.resources: dict[int, Any] = {0: "rmm's own"}

        class CallbackMemoryResource:
            def __init__(resource, allocate: Any, deallocate: Any) -> None:  # noqa: N805
                resource.allocate, resource.deallocate = allocate, deallocate

        self.mr = SimpleNamespace(
            CallbackMemoryResource=CallbackMemoryResource,
            get_per_device_resource=self.resources.__getitem__,
            set_per_device_resource=self.resources.__setitem__,
        )


class CudaStreamProtocol:
    def __init__(self, handle: int) -> None:
        self.handle = handle

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.handle)


@scenario
def rmm_allocates_through_a_python_resource() -> None:
    rmm = FakeRmm()
    # A stand-in module need not be hashable, nor its class subclassable.
    devmm.integrations.rmm._rmm_module_for = lambda platform: SimpleNamespace(mr=rmm.mr)
    mr = RecordingMemoryResource(CUDA)
    with devmm.integrations.rmm.install(mr):
        bridge = rmm.resources[0]
        ptr = bridge.allocate(256, CudaStreamProtocol(0xA0))
        bridge.deallocate(ptr, 256, CudaStreamProtocol(0xA0))
        assert [(op, nbytes, s.handle) for op, _, nbytes, s in mr.calls] == [
            ("allocate", 256, 0xA0),
            ("deallocate", 256, 0xA0),
        ]
    assert rmm.resources[0] == "rmm's own"


def rmm_family_resource(module: Any, resource: type, device: devmm.Device, handle: int) -> None:
    """A resource of the rmm family over a stand-in inner resource, with the
    library's Stream class stood in at ``module``'s seam."""
    translated: list[object] = []

    class LibraryStream:
        def __init__(self, obj: object) -> None:
            translated.append(obj)

    module._rmm_stream_class = lambda: LibraryStream
    inner = SimpleNamespace(allocate=lambda nbytes, stream: 0x4000, deallocate=lambda ptr, nbytes, stream: None)
    mr = resource(inner, device)
    devmm.DeviceBuffer(16, mr=mr, stream=ForeignHandleStream(device, handle)).free()
    # The library's Stream was made from devmm's stream, which speaks __cuda_stream__.
    assert len(translated) == 2 and all(s.__cuda_stream__() == (0, handle) for s in translated)  # type: ignore[attr-defined]
    assert mr._debug_live_count() == 0


@scenario
def an_rmm_resource_as_a_resource() -> None:
    rmm_family_resource(devmm.mrs.cuda, devmm.mrs.cuda.RmmMemoryResource, CUDA, 0xB0)


@scenario
def a_hipmm_resource_as_a_resource() -> None:
    rocm = devmm.Device.from_string("rocm:0")
    rmm_family_resource(devmm.mrs.rocm, devmm.mrs.rocm.HipmmMemoryResource, rocm, 0xC0)


class FakeNumbaCuda:
    """The part of numba.cuda the EMM plugin is built on."""

    def __init__(self) -> None:
        class Deallocations:
            def add_item(self, free: Callable[[int], None], key: int, size: int) -> None:
                free(key)

        class HostOnlyCUDAMemoryManager:
            def __init__(self, context: Any) -> None:
                self.context, self.deallocations = context, Deallocations()

        class MemoryPointer:
            def __init__(self, context: Any, pointer: Any, size: int, finalizer: Callable[[], None]) -> None:
                self.pointer, self.size, self.finalizer = pointer, size, finalizer

        self.HostOnlyCUDAMemoryManager: type = HostOnlyCUDAMemoryManager
        self.GetIpcHandleMixin = type("GetIpcHandleMixin", (), {})
        self.MemoryPointer = MemoryPointer
        self.cudadrv = SimpleNamespace(driver=SimpleNamespace(_memory_manager=None))

    def set_memory_manager(self, plugin: type) -> None:
        self.cudadrv.driver._memory_manager = plugin


class Context:
    """A Numba context on device 0 (the plugin holds it weakly)."""

    device = SimpleNamespace(id=0)


@scenario
def numba_allocates_through_a_python_resource() -> None:
    numba_cuda = FakeNumbaCuda()
    devmm.integrations.numba._numba_cuda_module = lambda: numba_cuda
    with devmm.integrations.numba.install():
        plugin_class = numba_cuda.cudadrv.driver._memory_manager
        assert plugin_class is devmm.integrations.numba.DevmmEMMPlugin
        plugin = plugin_class(Context())
        mr = RecordingMemoryResource(CUDA)
        with devmm.using_memory_resource(mr):
            pointer = plugin.memalloc(512)
        assert pointer.size == 512 and pointer.pointer.value == mr.calls[0][1]
        # On the default stream: the EMM interface carries none.
        assert mr.calls[0][3].handle == 0
        pointer.finalizer()
        assert mr._debug_live_count() == 0
    assert numba_cuda.cudadrv.driver._memory_manager is None


@scenario
def numba_stand_in_without_a_pending_free_queue() -> None:
    # A stand-in Numba as a seed-style test makes it: the base keeps only
    # its context, which takes no weak references.
    numba_cuda = FakeNumbaCuda()

    class BareManager:
        def __init__(self, context: Any) -> None:
            self.context = context
            self.allocations: dict[int, object] = {}

    numba_cuda.HostOnlyCUDAMemoryManager = BareManager
    devmm.integrations.numba._numba_cuda_module = lambda: numba_cuda
    devmm.integrations.numba._plugin_class_cache = None
    # Installed for the rest of the run: a context made with it pins it.
    devmm.integrations.numba.install()
    plugin = numba_cuda.cudadrv.driver._memory_manager(SimpleNamespace(device=SimpleNamespace(id=0)))
    mr = RecordingMemoryResource(CUDA)
    with devmm.using_memory_resource(mr):
        plugin.initialize()
        pointer = plugin.memalloc(256)
    assert mr._debug_live_count() == 1
    pointer.finalizer()  # freed at once: there is no queue to defer to
    assert mr._debug_live_count() == 0


for run in SCENARIOS:
    run()
    print(run.__name__)
