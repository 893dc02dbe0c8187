"""devmm.testing: the conformance suites and the recording resource."""

import ctypes
from typing import Any

import pytest

import devmm
import devmm.testing
from devmm.mrs.cpu import BytearrayMemoryResource, MallocMemoryResource


def test_shipped_resources_conform() -> None:
    devmm.testing.mr_conformance(MallocMemoryResource)
    devmm.testing.mr_conformance(BytearrayMemoryResource)
    devmm.testing.mr_conformance(lambda: devmm.StatisticsAdaptor(MallocMemoryResource()))


class Aliasing(devmm.DeviceMemoryResource):
    """Broken on purpose: every allocation gets the same block."""

    def __init__(self) -> None:
        super().__init__()
        self.block = ctypes.create_string_buffer(1 << 16)

    def allocate(self, nbytes: int, stream: Any) -> int:
        return ctypes.addressof(self.block)

    def deallocate(self, ptr: int, nbytes: int, stream: Any) -> None:
        pass


def test_violations_raise_assertion_errors_naming_the_checks() -> None:
    with pytest.raises(AssertionError, match="FAILED"):
        devmm.testing.mr_conformance(Aliasing)


def test_factory_exceptions_surface() -> None:
    def factory() -> devmm.DeviceMemoryResource:
        raise RuntimeError("no resource today")

    with pytest.raises(AssertionError, match="no resource today"):
        devmm.testing.mr_conformance(factory)


def test_custom_data_access_hooks_are_used() -> None:
    writes: list[int] = []

    def write(ptr: int, data: bytes, stream: devmm.Stream) -> None:
        writes.append(len(data))
        ctypes.memmove(ptr, data, len(data))

    def read(ptr: int, nbytes: int, stream: devmm.Stream) -> bytes:
        return ctypes.string_at(ptr, nbytes)

    devmm.testing.mr_conformance(MallocMemoryResource, write=write, read=read)
    assert writes
    devmm.testing.mr_conformance(devmm.testing.RecordingMemoryResource, data_access=False)


def test_recording_resource_logs_calls(stream: devmm.Stream) -> None:
    rec = devmm.testing.RecordingMemoryResource()
    buf = devmm.DeviceBuffer(64, mr=rec, stream=stream)
    assert rec.live == {256: 64}
    buf.free()
    assert rec.live == {}
    assert rec.calls == [("allocate", 64, 0, 256), ("deallocate", 256, 64, 0, True)]
    with pytest.raises(ValueError, match="double free"):
        rec.deallocate(256, 64, stream)
    assert rec.calls[-1] == ("deallocate", 256, 64, 0, False)


def test_recording_resource_alignment_and_device() -> None:
    rec = devmm.testing.RecordingMemoryResource("cuda:0", alignment=1024)
    assert rec.device == devmm.Device.from_string("cuda:0")
    assert rec.guaranteed_alignment() == 1024
    with pytest.raises(ValueError, match="power of two"):
        devmm.testing.RecordingMemoryResource(alignment=48)
