"""Python subclasses of the shipped resource classes, as the seed's plain
Python classes allow: a subclass that overrides ``allocate``/``deallocate``
is what ``empty``, ``DeviceBuffer``, adaptors and the registry allocate
through; one that does not keeps the native resource."""

import os
import subprocess
import sys
import textwrap
from typing import Any, Callable

import pytest

import devmm
import devmm.testing
from devmm.mrs.cpu import BytearrayMemoryResource, MallocMemoryResource, NumpyHandlerMemoryResource

SHIPPED: dict[str, Callable[[type], devmm.DeviceMemoryResource]] = {
    "malloc": lambda cls: cls(alignment=128),
    "bytearray": lambda cls: cls(alignment=128),
    "numpy": lambda cls: cls(),
    "statistics": lambda cls: cls(MallocMemoryResource()),
    "limiting": lambda cls: cls(MallocMemoryResource(), limit_bytes=1 << 20),
    "logging": lambda cls: cls(MallocMemoryResource()),
    "tracking": lambda cls: cls(MallocMemoryResource()),
    "recording": lambda cls: cls(guaranteed_alignment=128),
}
CLASSES: dict[str, type] = {
    "malloc": MallocMemoryResource,
    "bytearray": BytearrayMemoryResource,
    "numpy": NumpyHandlerMemoryResource,
    "statistics": devmm.StatisticsAdaptor,
    "limiting": devmm.LimitingAdaptor,
    "logging": devmm.LoggingAdaptor,
    "tracking": devmm.TrackingAdaptor,
    "recording": devmm.testing.RecordingMemoryResource,
}


@pytest.mark.parametrize("name", CLASSES)
def test_a_plain_subclass_is_the_shipped_resource(name: str, stream: devmm.Stream) -> None:
    base = CLASSES[name]
    plain = type("Plain", (base,), {})
    mr = SHIPPED[name](plain)
    assert isinstance(mr, base) and type(mr) is plain
    assert mr.device == devmm.Device.from_string("cpu")
    buf = devmm.DeviceBuffer(64, mr=mr, stream=stream)
    assert buf.mr is mr
    assert mr._debug_live_count() in (1, None)
    buf.free()
    assert mr._debug_live_count() in (0, None)
    with devmm.using_memory_resource(mr):
        assert devmm.get_current_memory_resource(devmm.Device.from_string("cpu")) is mr


class CountingMalloc(MallocMemoryResource):
    """The seed's way to extend a resource: its own constructor, then
    ``super()`` for the real work."""

    def __init__(self, tag: str, *, alignment: int = 64) -> None:
        super().__init__(alignment=alignment)
        self.tag = tag
        self.calls: list[tuple[str, int]] = []

    def allocate(self, nbytes: int, stream: Any = None) -> int:
        self.calls.append(("allocate", nbytes))
        return super().allocate(nbytes, stream)

    def deallocate(self, ptr: int, nbytes: int, stream: Any = None) -> None:
        self.calls.append(("deallocate", nbytes))
        super().deallocate(ptr, nbytes, stream)


def test_a_subclass_constructor_passes_its_own_arguments_up() -> None:
    mr = CountingMalloc("x", alignment=256)
    assert (mr.tag, mr.guaranteed_alignment(), mr.calls) == ("x", 256, [])
    assert repr(mr) == "CountingMalloc(device=cpu:0, alignment=256)"


def test_overridden_methods_are_what_empty_and_buffers_allocate_through(stream: devmm.Stream) -> None:
    mr = CountingMalloc("t")
    t = devmm.empty((4, 4), "float32", layout=devmm.RowMajor(), mr=mr)
    assert t.buffer.ptr % 64 == 0 and mr._debug_live_count() == 1
    t.buffer.free()
    buf = devmm.DeviceBuffer(8, mr=mr, stream=stream)
    buf.free()
    assert mr.calls == [("allocate", 64), ("deallocate", 64), ("allocate", 8), ("deallocate", 8)]
    assert mr._debug_live_count() == 0


def test_overrides_are_honoured_under_adaptors_and_the_registry() -> None:
    mr = CountingMalloc("r")
    stats = devmm.StatisticsAdaptor(mr)
    assert stats.upstream is mr
    devmm.empty((2,), "float64", layout=devmm.RowMajor(), mr=stats).buffer.free()
    with devmm.using_memory_resource(mr):
        devmm.empty((3,), "uint8", layout=devmm.RowMajor()).buffer.free()
    assert mr.calls == [("allocate", 16), ("deallocate", 16), ("allocate", 3), ("deallocate", 3)]
    assert stats.total_bytes == 16


def test_an_overriding_allocate_may_refuse(stream: devmm.Stream) -> None:
    class Refusing(MallocMemoryResource):
        def allocate(self, nbytes: int, stream: Any = None) -> int:
            raise MemoryError(f"Refusing holds no {nbytes} bytes")

    mr = Refusing()
    with pytest.raises(MemoryError, match="Refusing holds no 32 bytes"):
        devmm.empty((32,), "uint8", layout=devmm.RowMajor(), mr=mr)
    assert mr._debug_live_count() == 0


def test_an_adaptor_subclass_keeps_its_properties(stream: devmm.Stream) -> None:
    class Audited(devmm.StatisticsAdaptor):
        def __init__(self, upstream: devmm.DeviceMemoryResource) -> None:
            super().__init__(upstream)
            self.seen: list[int] = []

        def allocate(self, nbytes: int, stream: Any = None) -> int:
            self.seen.append(nbytes)
            return super().allocate(nbytes, stream)

    upstream = MallocMemoryResource()
    mr = Audited(upstream)
    t = devmm.empty((5,), "uint8", layout=devmm.RowMajor(), mr=mr)
    assert (mr.seen, mr.current_bytes, mr.upstream) == ([5], 5, upstream)
    t.buffer.free()
    assert mr.current_bytes == 0 and repr(mr).startswith("Audited(upstream=MallocMemoryResource(")


def test_a_recording_subclass_may_override_deallocate(stream: devmm.Stream) -> None:
    class Forgetful(devmm.testing.RecordingMemoryResource):
        def deallocate(self, ptr: int, nbytes: int, stream: Any = None) -> None:
            self.freed = (ptr, nbytes)
            super().deallocate(ptr, nbytes, stream)

    mr = Forgetful(stream_ordered=False)
    assert mr.stream_ordered is False
    buf = devmm.DeviceBuffer(16, mr=mr, stream=stream)
    buf.free()
    assert mr.freed == (256, 16) and mr.live == {}


def test_a_subclass_that_skips_the_base_constructor_says_so(stream: devmm.Stream) -> None:
    class Forgot(MallocMemoryResource):
        def __init__(self) -> None:
            self.ready = True

    mr = Forgot()
    with pytest.raises(TypeError, match=r"Forgot\.__init__ must call super\(\)\.__init__"):
        mr.allocate(8, stream)
    with pytest.raises(TypeError, match=r"super\(\)\.__init__"):
        devmm.DeviceBuffer(8, mr=mr, stream=stream)


def test_the_base_constructor_runs_once(stream: devmm.Stream) -> None:
    mr = MallocMemoryResource()
    with pytest.raises(TypeError, match="already"):
        mr.__init__(alignment=8)  # type: ignore[misc]
    assert mr.guaranteed_alignment() == 64
    with pytest.raises(TypeError, match="alignment"):
        MallocMemoryResource(alignment="big")  # type: ignore[arg-type]


GPU_SUBCLASSES = textwrap.dedent(
    """
    import devmm
    import devmm.mrs.{module} as mrs

    class Counting(mrs.{device_mr}):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.sizes = []

        def allocate(self, nbytes, stream):
            self.sizes.append(nbytes)
            return super().allocate(nbytes, stream)

    for cls in (mrs.{device_mr}, mrs.{pinned_mr}):
        plain = type("Plain", (cls,), {{}})()
        devmm.DeviceBuffer(64, mr=plain).free()
        assert plain._debug_live_count() == 0, cls

    mr = Counting(async_alloc=False)
    assert mr.stream_ordered is False and mr.guaranteed_alignment() == 256
    # The seed's repr: the class's name, the device and the allocator.
    assert repr(mr) == "Counting(device={module}:0, async_alloc=False)", repr(mr)
    assert repr(mrs.{device_mr}(async_alloc=True)) == "{device_mr}(device={module}:0, async_alloc=True)"
    t = devmm.empty((64,), "uint8", layout=devmm.RowMajor(), mr=mr)
    assert t.device == devmm.Device.from_string("{module}:0")
    t.free()
    assert mr.sizes == [64] and mr._debug_live_count() == 0
    print("ok")
    """
)

GPU_PLATFORMS = {
    "cuda": dict(env="DEVMM_TEST_FAKE_CUDART", path_var="DEVMM_CUDART_PATH", module="cuda",
                 device_mr="CudaRuntimeMemoryResource", pinned_mr="CudaPinnedMemoryResource"),
    "rocm": dict(env="DEVMM_TEST_FAKE_HIP", path_var="DEVMM_HIP_PATH", module="rocm",
                 device_mr="HipRuntimeMemoryResource", pinned_mr="HipPinnedMemoryResource"),
}


@pytest.mark.parametrize("platform", sorted(GPU_PLATFORMS))
def test_gpu_resource_subclasses_over_the_fake_drivers(platform: str, fake_library: Callable[[str], str]) -> None:
    p = GPU_PLATFORMS[platform]
    env = dict(os.environ, **{p["path_var"]: fake_library(p["env"])})
    script = GPU_SUBCLASSES.format(**p)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_an_overridden_alignment_promise_is_what_empty_trusts() -> None:
    # The seed's empty over-allocates when mr.guaranteed_alignment() is less
    # than the layout's base alignment; a subclass's promise is its own.
    class Modest(MallocMemoryResource):
        def guaranteed_alignment(self) -> int:
            return 1

    layout = devmm.Aligned(devmm.RowMajor(), 1, 64)
    trusted = devmm.empty((16,), "uint8", layout=layout, mr=MallocMemoryResource())
    modest = devmm.empty((16,), "uint8", layout=layout, mr=Modest())
    assert modest.data_ptr % 64 == 0
    assert modest.buffer.nbytes > trusted.buffer.nbytes
    trusted.free()
    modest.free()
