"""The rest of the seed's private modules that code and tests written
against it import (docs/adr/0016): the platform runtime classes,
discovery's test seams, ``devmm._nep49``, the provide arrows' shared
plumbing and the conformance suite's per-check functions."""

from __future__ import annotations

import contextlib
import importlib
import os
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from importlib.metadata import EntryPoint

import pytest

import devmm
import devmm.integrations
import devmm.testing
from devmm._runtimes import _discovery
from devmm._runtimes.cpu import CpuRuntime
from devmm._runtimes.cuda import CudaRuntime
from devmm._runtimes.rocm import HipRuntime
from devmm.integrations import _support
from devmm.mrs.cpu import MallocMemoryResource
from devmm.testing import _conformance

#: What a resource's allocate and deallocate take as their stream.
AnyStream = devmm.Stream | devmm.StreamSentinel | None


# --- devmm._runtimes.{cpu,cuda,rocm} ---------------------------------------


def test_cpu_runtime_is_the_cpu_runtime_and_isinstance_names_it_alone() -> None:
    rt = CpuRuntime()
    assert rt is devmm.runtime_for("cpu") and CpuRuntime() is rt
    assert isinstance(rt, CpuRuntime) and isinstance(rt, devmm.DeviceRuntime)
    assert not isinstance(rt, CudaRuntime) and not isinstance(rt, HipRuntime)
    assert not isinstance("cpu", CpuRuntime)
    assert (CpuRuntime.name, CudaRuntime.name, HipRuntime.name) == ("cpu", "cuda", "rocm")
    cpu = devmm.Device.from_string("cpu")
    assert type(rt.default_memory_resource(cpu)).__name__ == "MallocMemoryResource"


def test_a_platform_class_cannot_be_subclassed() -> None:
    # Calling a subclass would return the core's runtime, so its overrides
    # would silently never run.
    with pytest.raises(TypeError, match="CpuRuntime cannot be subclassed"):

        class Mine(CpuRuntime):  # type: ignore[misc]  # final: the point of the test
            def default_memory_resource(self, device: devmm.Device) -> devmm.DeviceMemoryResource:
                raise AssertionError("never reached")


def test_a_platform_class_takes_no_driver_table() -> None:
    with pytest.raises(TypeError, match="CudaRuntime takes no api"):
        CudaRuntime(api=object())  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("cls", "env", "path_var"),
    [(CudaRuntime, "DEVMM_TEST_FAKE_CUDART", "DEVMM_CUDART_PATH"), (HipRuntime, "DEVMM_TEST_FAKE_HIP", "DEVMM_HIP_PATH")],
)
def test_a_gpu_platform_class_is_that_runtime_where_it_runs_and_unavailable_where_not(
    cls: type[CudaRuntime] | type[HipRuntime], env: str, path_var: str, fake_library: Callable[[str], str]
) -> None:
    module, name = cls.__module__, cls.__name__
    script = (
        f"import devmm\nfrom {module} import {name}\nfrom devmm._runtimes.cpu import CpuRuntime\n"
        f"rt = {name}()\n"
        f"assert rt is devmm.runtime_for({cls.name!r}) and isinstance(rt, {name})\n"
        f"assert not isinstance(rt, CpuRuntime) and not isinstance(devmm.runtime_for('cpu'), {name})\n"
        "print(rt.name)\n"
    )
    found = dict(os.environ, **{path_var: fake_library(env)})
    done = subprocess.run([sys.executable, "-c", script], env=found, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == cls.name, done.stderr
    missing = dict(os.environ, **{path_var: "/nonexistent/libdriver.so"})
    script = f"import devmm\nfrom {module} import {name}\ntry:\n    {name}()\nexcept devmm.RuntimeUnavailableError:\n    print('unavailable')\n"
    done = subprocess.run([sys.executable, "-c", script], env=missing, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "unavailable", done.stderr


# --- devmm._runtimes._discovery ---------------------------------------------


class FakeRuntime:
    """A third-party runtime serving the CPU, as an entry point would make."""

    name = "fakeplatform"
    device_types = frozenset({devmm.DeviceType.CPU})

    def device_count(self, device_type: devmm.DeviceType) -> int:
        return 1

    def default_memory_resource(self, device: devmm.Device) -> devmm.DeviceMemoryResource:
        return MallocMemoryResource(device)

    def default_stream(self, device: devmm.Device) -> devmm.Stream:
        return devmm.runtime_for(device).default_stream(device)


@contextlib.contextmanager
def fake_seam() -> Iterator[list[int]]:
    """A ``devmm.runtimes`` entry point listed through the seed's seam, undone
    on exit; the list counts the scans."""
    scans: list[int] = []
    point = EntryPoint(name="fakeplatform", value=f"{__name__}:FakeRuntime", group="devmm.runtimes")

    def entry_points() -> list[EntryPoint]:
        scans.append(1)
        return [point]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_discovery, "_entry_points", entry_points)
        patch.setattr(_discovery, "_loaded", {})
        _discovery._clear_spec_cache()
        try:
            yield scans
        finally:
            patch.undo()
            _discovery._clear_spec_cache()


@pytest.fixture
def fake_entry_point() -> Iterator[list[int]]:
    with fake_seam() as scans:
        yield scans


def test_discovery_finds_entry_points_through_its_seam_and_looks_up_by_the_last_scan(
    fake_entry_point: list[int],
) -> None:
    assert _discovery.runtime_names is devmm.runtime_names
    assert _discovery.runtime_for is devmm.runtime_for
    assert _discovery.available_runtimes is devmm.available_runtimes
    rt = devmm.runtime_for("fakeplatform")
    assert type(rt) is FakeRuntime and devmm.runtime_for("fakeplatform") is rt
    assert _discovery._loaded == {"fakeplatform": rt}
    assert len(fake_entry_point) == 1  # the lookups by name used one scan
    _discovery._clear_spec_cache()
    devmm.runtime_for("fakeplatform")
    assert len(fake_entry_point) == 2
    names = devmm.runtime_names()  # scans each call, as docs/python.md shows
    assert names[-1] == "fakeplatform" and "cpu" in names and len(fake_entry_point) == 3
    assert rt in devmm.available_runtimes()


def test_clearing_the_scan_forgets_entry_points_gone_since(
    fake_entry_point: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "fakeplatform" in devmm.runtime_names()
    monkeypatch.setattr(_discovery, "_entry_points", list)
    _discovery._clear_spec_cache()
    assert "fakeplatform" not in devmm.runtime_names()
    with pytest.raises(devmm.RuntimeUnavailableError):
        devmm.runtime_for("fakeplatform")


def test_undoing_the_seam_forgets_the_fake_runtime() -> None:
    with fake_seam():
        assert "fakeplatform" in devmm.runtime_names()
        assert type(devmm.runtime_for("fakeplatform")) is FakeRuntime
    assert "fakeplatform" not in devmm.runtime_names()
    with pytest.raises(devmm.RuntimeUnavailableError):
        devmm.runtime_for("fakeplatform")


def test_an_entry_point_taking_a_builtin_name_is_ignored_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    point = EntryPoint(name="cpu", value=f"{__name__}:FakeRuntime", group="devmm.runtimes")
    monkeypatch.setattr(_discovery, "_entry_points", lambda: [point])
    _discovery._clear_spec_cache()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert devmm.runtime_names().count("cpu") == 1
        assert any("ignoring the devmm.runtimes entry point" in str(w.message) for w in caught)
        assert devmm.runtime_for("cpu") is CpuRuntime()
    finally:
        monkeypatch.undo()
        _discovery._clear_spec_cache()


# --- devmm._nep49 -----------------------------------------------------------


def test_nep49_api_reads_and_sets_numpys_handler() -> None:
    import numpy as np

    from devmm import _nep49
    from devmm.integrations import numpy as devmm_numpy

    try:
        multiarray = importlib.import_module("numpy._core.multiarray")
    except ImportError:  # NumPy 1.x
        multiarray = importlib.import_module("numpy.core.multiarray")
    api = _nep49.load_api()
    assert api.module is np
    before = api.get_handler()
    with devmm_numpy.install(MallocMemoryResource()):
        ours = api.get_handler()
        assert ours is not before and multiarray.get_handler_name() == "devmm"
        assert api.set_handler(before) is ours
        assert multiarray.get_handler_name() == "default_allocator"
        api.set_handler(ours)  # back, so that the installer's uninstall is in order
    assert api.get_handler() is before


def test_nep49_api_calls_the_entry_points_it_is_given() -> None:
    from devmm import _nep49

    calls: list[object] = []

    def set_handler(capsule: object) -> str:
        calls.append(capsule)
        return "previous"

    api = _nep49.Nep49Api(sys, lambda: "current", set_handler)
    assert (api.module, api.get_handler(), api.set_handler("new")) == (sys, "current", "previous")
    assert calls == ["new"]


def test_nep49_load_api_without_numpy_is_runtime_unavailable() -> None:
    script = (
        "import sys\nsys.modules['numpy'] = None\nimport devmm\nfrom devmm import _nep49\n"
        "try:\n    _nep49.load_api()\nexcept devmm.RuntimeUnavailableError as err:\n    print(type(err).__mro__[1].__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ImportError", done.stderr


# --- devmm.integrations._support --------------------------------------------


def test_support_installer_is_the_public_one() -> None:
    assert _support.Installer is devmm.integrations.Installer
    assert _support.__all__ == ["Installer"]


class ConsumesCupy(devmm.DeviceMemoryResource):
    """A resource that says it allocates through CuPy."""

    consumes = "cupy"

    def allocate(self, nbytes: int, stream: AnyStream = None) -> int:
        raise MemoryError("never allocated")

    def deallocate(self, ptr: int, nbytes: int, stream: AnyStream = None) -> None:
        pass


def test_ensure_no_cycle_refuses_a_chain_that_allocates_through_the_library() -> None:
    inner = ConsumesCupy()
    with pytest.raises(ValueError, match="would create an allocation cycle"):
        _support.ensure_no_cycle(inner, ConsumesCupy, "CuPy")
    with pytest.raises(ValueError, match="would create an allocation cycle"):
        _support.ensure_no_cycle(devmm.StatisticsAdaptor(inner), ConsumesCupy, "cupy")
    _support.ensure_no_cycle(MallocMemoryResource(), ConsumesCupy, "cupy")


class Forbidden(MallocMemoryResource):
    """A resource class a caller knows to allocate through a library, though
    it says nothing (no ``consumes``)."""


def test_ensure_no_cycle_refuses_a_forbidden_instance_anywhere_in_the_chain() -> None:
    with pytest.raises(ValueError, match="Forbidden in its chain allocates through CuPy"):
        _support.ensure_no_cycle(Forbidden(), Forbidden, "cupy")
    with pytest.raises(ValueError, match="Forbidden in its chain allocates through CuPy"):
        _support.ensure_no_cycle(devmm.StatisticsAdaptor(Forbidden()), Forbidden, "cupy")
    _support.ensure_no_cycle(devmm.StatisticsAdaptor(MallocMemoryResource()), Forbidden, "cupy")
    _support.ensure_no_cycle(ConsumesCupy(), Forbidden, "rmm")


class ConsumesHipmm(MallocMemoryResource):
    consumes = "hipmm"


def test_ensure_no_cycle_for_rmm_covers_hipmm() -> None:
    with pytest.raises(ValueError, match="would create an allocation cycle"):
        _support.ensure_no_cycle(devmm.StatisticsAdaptor(ConsumesHipmm()), ConsumesCupy, "rmm")
    _support.ensure_no_cycle(ConsumesHipmm(), ConsumesCupy, "cupy")


def test_foreign_handle_stream_carries_a_handle_into_resource_calls() -> None:
    cpu = devmm.Device.from_string("cpu")
    stream = _support.ForeignHandleStream(cpu, 0)
    assert isinstance(stream, devmm.Stream) and stream.handle == 0 and stream.device == cpu
    mr = MallocMemoryResource()
    ptr = mr.allocate(64, stream)
    mr.deallocate(ptr, 64, stream)
    stream.synchronize()
    stream.wait_raw(0)
    with pytest.raises(ValueError):
        _support.ForeignHandleStream(cpu, 7).synchronize()  # the CPU has one stream, handle 0


@pytest.mark.parametrize("handle", ["0", 1.0, True, None])
def test_foreign_handle_stream_refuses_a_handle_that_is_no_int(handle: object) -> None:
    with pytest.raises(TypeError, match="a stream handle is an int"):
        _support.ForeignHandleStream(devmm.Device.from_string("cpu"), handle)  # type: ignore[arg-type]


@pytest.mark.parametrize("handle", [-1, 2**64])
def test_foreign_handle_stream_refuses_a_handle_out_of_range(handle: int) -> None:
    with pytest.raises(ValueError, match=r"stream handles are ints in \[0, 2\*\*64\)"):
        _support.ForeignHandleStream(devmm.Device.from_string("cpu"), handle)


def test_foreign_handle_stream_repr_names_its_handle_even_where_no_runtime_serves() -> None:
    gpu = devmm.Device.from_string("cuda:3")
    # The base Stream's repr, which reads only the device and the handle.
    assert repr(_support.ForeignHandleStream(gpu, 2**64 - 1)) == (
        "ForeignHandleStream(device=cuda:3, handle=0xffffffffffffffff)"
    )


def test_stream_handle_of_reads_the_ecosystems_spellings() -> None:
    class Protocol:
        def __cuda_stream__(self) -> tuple[int, int]:
            return (0, 11)

    class Cupy:
        ptr = 12

    class Rmm:
        value = 13

    class Numba:
        handle = 14

    of = _support.stream_handle_of
    assert [of(None), of(5), of(Protocol()), of(Cupy()), of(Rmm()), of(Numba())] == [0, 5, 11, 12, 13, 14]
    with pytest.raises(TypeError, match="cannot read a stream handle from 'object'"):
        of(object())


def test_stream_handle_of_reads_a_devmm_stream_by_its_handle() -> None:
    # devmm's Stream has __cuda_stream__, which serves CUDA streams only.
    cpu_stream = devmm.runtime_for("cpu").default_stream("cpu")
    assert _support.stream_handle_of(cpu_stream) == 0
    foreign = _support.ForeignHandleStream(devmm.Device.from_string("cpu"), 0)
    assert _support.stream_handle_of(foreign) == 0


LIBRARY_STREAMS = """
import devmm
from devmm.integrations._support import ForeignHandleStream, library_streams
gpu = devmm.Device.from_string("cuda:0")
stream_of = library_streams(gpu)
try:
    native = devmm.runtime_for(gpu).create_stream(gpu)
except devmm.RuntimeUnavailableError:
    stream = stream_of(0x50)
    assert type(stream) is ForeignHandleStream and (stream.device, stream.handle) == (gpu, 0x50)
    print("foreign")
else:
    stream = stream_of(native.handle)
    assert type(stream) is type(native) and stream == native, (stream, native)
    print("native")
"""


@pytest.mark.parametrize("driver", ["fake", "missing"])
def test_library_streams_are_the_runtimes_own_where_it_loads_and_foreign_where_not(
    driver: str, fake_library: Callable[[str], str]
) -> None:
    library = fake_library("DEVMM_TEST_FAKE_CUDART") if driver == "fake" else "/nonexistent/libcudart.so"
    env = dict(os.environ, DEVMM_CUDART_PATH=library)
    env.pop("DEVMM_RUNTIME", None)
    done = subprocess.run([sys.executable, "-c", LIBRARY_STREAMS], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ("native" if driver == "fake" else "foreign")


def test_stream_handle_of_refuses_a_protocol_handle_that_is_no_int() -> None:
    class Odd:
        def __cuda_stream__(self) -> tuple[int, str]:
            return (0, "11")

    with pytest.raises(TypeError, match="__cuda_stream__ must give an int stream handle, got '11'"):
        _support.stream_handle_of(Odd())


def test_stream_handle_of_falls_through_a_none_protocol() -> None:
    class NoProtocol:
        __cuda_stream__ = None
        handle = 9

    assert _support.stream_handle_of(NoProtocol()) == 9


# --- devmm.testing._conformance ---------------------------------------------


def test_conformance_entry_points_are_the_public_ones() -> None:
    assert _conformance.mr_conformance is devmm.testing.mr_conformance
    assert _conformance.dlpack_conformance is devmm.testing.dlpack_conformance


def test_host_write_and_host_read_copy_host_memory() -> None:
    mr, stream = MallocMemoryResource(), devmm.runtime_for("cpu").default_stream("cpu")
    ptr = mr.allocate(5, stream)
    _conformance.host_write(ptr, b"hello")
    assert _conformance.host_read(ptr, 5) == b"hello" and _conformance.host_read(ptr, 0) == b""
    assert _conformance.live_count(mr) == 1
    mr.deallocate(ptr, 5, stream)
    assert _conformance.live_count(mr) == 0


class NoHook:
    pass


class UncallableHook:
    _debug_live_count = 3


class StrCount:
    def _debug_live_count(self) -> str:
        return "3"


@pytest.mark.parametrize(
    ("mr", "says"),
    [
        (NoHook(), "does not expose the _debug_live_count"),
        (UncallableHook(), "does not expose the _debug_live_count"),
        (StrCount(), "must return an int, got '3'"),
    ],
    ids=["missing", "not-callable", "not-int"],
)
def test_live_count_refuses_a_resource_without_an_int_count(mr: object, says: str) -> None:
    with pytest.raises(AssertionError, match=says):
        _conformance.live_count(mr)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "check", [_conformance.check_bookkeeping, _conformance.check_foreign_free, _conformance.check_zero_byte]
)
def test_the_counting_checks_count_absolutely(check: Callable[..., None]) -> None:
    mr, stream = MallocMemoryResource(), devmm.runtime_for("cpu").default_stream("cpu")
    held = mr.allocate(8, stream)  # held before the check: the seed's checks want none
    try:
        with pytest.raises(AssertionError, match="_debug_live_count\\(\\) is 1 after the check, not 0"):
            check(mr, stream)
    finally:
        mr.deallocate(held, 8, stream)


WITH_DATA: list[Callable[..., None]] = [_conformance.check_write_then_read, _conformance.check_no_aliasing]
WITHOUT_DATA: list[Callable[..., None]] = [
    _conformance.check_guaranteed_alignment,
    _conformance.check_bookkeeping,
    _conformance.check_double_free,
    _conformance.check_foreign_free,
    _conformance.check_zero_byte,
    _conformance.check_negative_size,
]


@pytest.mark.parametrize("check", WITH_DATA + WITHOUT_DATA, ids=lambda f: f.__name__)
def test_each_check_passes_for_a_conforming_resource(check: Callable[..., None]) -> None:
    mr, stream = MallocMemoryResource(), devmm.runtime_for("cpu").default_stream("cpu")
    if check in WITH_DATA:
        check(mr, stream, _conformance.host_write, _conformance.host_read)
    else:
        check(mr, stream)
    assert _conformance.live_count(mr) == 0


class Lax(devmm.DeviceMemoryResource):
    """Host memory that never refuses a free, misstates its alignment, and
    accepts a negative size."""

    dereferenceable = True

    def __init__(self) -> None:
        super().__init__()
        self.inner = MallocMemoryResource()

    def allocate(self, nbytes: int, stream: AnyStream = None) -> int:
        return self.inner.allocate(max(nbytes, 0), stream) + 1

    def deallocate(self, ptr: int, nbytes: int, stream: AnyStream = None) -> None:
        pass

    def guaranteed_alignment(self) -> int:
        return 64

    @property
    def detects_misuse(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("check", "says"),
    [
        (_conformance.check_guaranteed_alignment, "alignment"),
        (_conformance.check_double_free, "misuse_detection"),
        (_conformance.check_foreign_free, "misuse_detection"),
        (_conformance.check_bookkeeping, "FAILED live_count"),
        (_conformance.check_zero_byte, "FAILED zero_byte"),
        (_conformance.check_negative_size, "negative allocation size"),
    ],
    ids=lambda v: getattr(v, "__name__", "says"),
)
def test_each_check_fails_with_an_assertion_saying_why(check: Callable[..., None], says: str) -> None:
    with pytest.raises(AssertionError, match=says):
        check(Lax(), devmm.runtime_for("cpu").default_stream("cpu"))


class OnePointer(devmm.DeviceMemoryResource):
    """Host memory that hands out one block to every request."""

    dereferenceable = True

    def __init__(self) -> None:
        super().__init__()
        self.inner = MallocMemoryResource()
        self.block = self.inner.allocate(4096, devmm.runtime_for("cpu").default_stream("cpu"))

    def allocate(self, nbytes: int, stream: AnyStream = None) -> int:
        return self.block

    def deallocate(self, ptr: int, nbytes: int, stream: AnyStream = None) -> None:
        pass


def test_the_aliasing_check_fails_for_one_pointer_twice() -> None:
    mr, stream = OnePointer(), devmm.runtime_for("cpu").default_stream("cpu")
    with pytest.raises(AssertionError, match="FAILED no_aliasing"):
        _conformance.check_no_aliasing(mr, stream, _conformance.host_write, _conformance.host_read)
    mr.inner.deallocate(mr.block, 4096, stream)


def test_the_zero_byte_check_fails_for_one_pointer_twice() -> None:
    # The seed's check holds two zero-byte blocks at once: one address for
    # both is refused (null, every devmm resource's answer, passes).
    mr, stream = OnePointer(), devmm.runtime_for("cpu").default_stream("cpu")
    with pytest.raises(AssertionError, match="FAILED zero_byte: .*both returned"):
        _conformance.check_zero_byte(mr, stream)
    mr.inner.deallocate(mr.block, 4096, stream)
    _conformance.check_zero_byte(MallocMemoryResource(), stream)


def test_a_data_check_runs_the_hooks_it_is_given() -> None:
    mr, stream = MallocMemoryResource(), devmm.runtime_for("cpu").default_stream("cpu")
    calls: list[str] = []

    def write(ptr: int, data: bytes) -> None:
        calls.append("write")
        _conformance.host_write(ptr, data)

    def read(ptr: int, nbytes: int) -> bytes:
        calls.append("read")
        return bytes(nbytes)  # zeros: not what was written

    with pytest.raises(AssertionError, match="write_read_exact"):
        _conformance.check_write_then_read(mr, stream, write, read)
    assert "write" in calls and "read" in calls
