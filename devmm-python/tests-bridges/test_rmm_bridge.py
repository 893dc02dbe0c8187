"""rmm both ways, against the real rmm package (rmm-cu13), over devmm's
fake CUDA runtime: rmm's Python resources run without a GPU, so rmm's own
CallbackMemoryResource stands for a configured rmm stack, and
rmm.DeviceBuffer allocates through devmm once it is installed."""

from __future__ import annotations

import ctypes
import importlib.metadata
import os
from typing import Any

import pytest
import rmm

import devmm
import devmm.integrations.rmm as bridge
import devmm.testing
from devmm.integrations import Installer
from devmm.mrs.cuda import CudaRuntimeMemoryResource, RmmMemoryResource
from devmm.mrs.rocm import HipmmMemoryResource, HipRuntimeMemoryResource
from devmm.mrs._rmm import rmm_platform


class RecordingRmmStack:
    """An rmm resource over devmm's CUDA memory, recording the stream
    handles rmm hands it."""

    def __init__(self, backing: devmm.DeviceMemoryResource) -> None:
        self.streams: list[int] = []
        self.live: dict[int, int] = {}

        def allocate(nbytes: int, stream: Any) -> int:
            self.streams.append(stream.__cuda_stream__()[1])
            ptr = backing.allocate(nbytes)
            self.live[ptr] = nbytes
            return ptr

        def deallocate(ptr: int, nbytes: int, stream: Any) -> None:
            self.streams.append(stream.__cuda_stream__()[1])
            assert self.live.pop(ptr) == nbytes
            backing.deallocate(ptr, nbytes)

        self.mr = rmm.mr.CallbackMemoryResource(allocate, deallocate)


@pytest.fixture
def rmm_stack(cuda0: devmm.Device) -> RecordingRmmStack:
    return RecordingRmmStack(CudaRuntimeMemoryResource(cuda0))


def test_the_platform_of_rmm_is_read_from_its_distribution() -> None:
    assert rmm_platform(["rmm-cu13"]) == rmm_platform(["rmm-cu12"]) == "cuda"
    assert rmm_platform(["hipmm"]) == rmm_platform(["amd-hipmm"]) == "rocm"
    assert rmm_platform(["unknown"]) is None
    assert rmm_platform(["unknown"], "rocm") == "rocm"
    assert rmm_platform(["rmm-cu13"], "rocm") == "cuda"  # metadata wins over the override
    # The installed one is RAPIDS rmm, so it is not hipMM.
    with pytest.raises(devmm.RuntimeUnavailableError, match="not rocm, so it is not hipmm"):
        HipmmMemoryResource()


def test_rmm_memory_round_trips_through_devmm(rmm_stack: RecordingRmmStack, cuda0: devmm.Device) -> None:
    mr = RmmMemoryResource(rmm_stack.mr, cuda0)
    assert mr.inner is rmm_stack.mr and mr.stream_ordered and mr.guaranteed_alignment() == 256
    stream = devmm.runtime_for(cuda0).create_stream(cuda0)
    t = devmm.empty((4, 3), "float32", device=cuda0, mr=mr, stream=stream)
    t.buffer.copy_from_host(b"through rmm")
    assert bytes(t.buffer.copy_to_host(nbytes=11)) == b"through rmm"
    assert len(rmm_stack.live) == 1 and mr._debug_live_count() == 1
    t.buffer.free()
    assert rmm_stack.live == {} and mr._debug_live_count() == 0
    # rmm saw devmm's stream for both calls.
    assert rmm_stack.streams == [stream.handle, stream.handle]
    devmm.testing.mr_conformance(lambda: RmmMemoryResource(rmm_stack.mr, cuda0))


def test_misuse_is_refused_before_rmm_sees_it(rmm_stack: RecordingRmmStack, cuda0: devmm.Device) -> None:
    mr = RmmMemoryResource(rmm_stack.mr, cuda0)
    ptr = mr.allocate(64)
    with pytest.raises(ValueError, match="did not hand out 32 bytes"):
        mr.deallocate(ptr, 32)
    mr.deallocate(ptr, 64)
    with pytest.raises(ValueError, match="did not hand out"):
        mr.deallocate(ptr, 64)
    assert rmm_stack.live == {}
    with pytest.raises(ValueError, match="serves CUDA devices"):
        RmmMemoryResource(rmm_stack.mr, "rocm:0")


def test_rmm_is_called_with_the_resources_device_current() -> None:
    # rmm's per-device resources allocate on the current device ("used when
    # a different device is the active CUDA device, behavior is undefined").
    fake = ctypes.CDLL(os.environ["DEVMM_TEST_FAKE_CUDART"])

    def current() -> int:
        device = ctypes.c_int(-1)
        assert fake.cudaGetDevice(ctypes.byref(device)) == 0
        return device.value

    # The caller's own device, made current (and so given its context) by
    # the caller, as a program that chose it would have.
    assert fake.cudaSetDevice(0) == 0
    seen: list[int] = []
    backing = CudaRuntimeMemoryResource("cuda:1")

    def allocate(nbytes: int, stream: Any) -> int:
        seen.append(current())
        return int(backing.allocate(nbytes))

    def deallocate(ptr: int, nbytes: int, stream: Any) -> None:
        seen.append(current())
        backing.deallocate(ptr, nbytes)

    mr = RmmMemoryResource(rmm.mr.CallbackMemoryResource(allocate, deallocate), "cuda:1")
    assert current() == 0
    mr.deallocate(mr.allocate(64), 64)
    assert seen == [1, 1], seen
    assert current() == 0, "the caller's device is current again"


def test_the_default_inner_is_rmms_resource_for_the_device() -> None:
    assert RmmMemoryResource(device="cuda:1").inner is rmm.mr.get_per_device_resource(1)


def test_rmm_allocates_through_devmm_until_uninstalled(cuda_stats: devmm.StatisticsAdaptor) -> None:
    before = rmm.mr.get_per_device_resource(0)
    installer = bridge.install(cuda_stats)
    assert isinstance(installer, Installer) and repr(installer) == "Installer(library='rmm', installed)"
    current = rmm.mr.get_per_device_resource(0)
    assert current is not before and bridge._is_devmm_bridge(current)
    buffer = rmm.DeviceBuffer(size=1000, mr=current)
    assert buffer.size == 1000 and buffer.ptr != 0
    assert (cuda_stats.current_bytes, cuda_stats.allocations) == (1000, 1)
    del buffer
    assert (cuda_stats.current_bytes, cuda_stats.deallocations) == (0, 1)
    installer.uninstall()
    installer.uninstall()  # idempotent
    assert not installer.installed
    assert rmm.mr.get_per_device_resource(0) is before


def test_the_bridge_takes_the_stream_conventions_of_rmm_callers(monkeypatch: pytest.MonkeyPatch, cuda_stats: devmm.StatisticsAdaptor) -> None:
    # As the seed's bridge: a callback called without a stream (rmm's older
    # convention), with None, or with a raw handle allocates on that stream,
    # the default one for the first two.
    seen: dict[str, Any] = {}

    class Capturing(rmm.mr.CallbackMemoryResource):  # type: ignore[misc]
        def __init__(self, allocate: Any, deallocate: Any) -> None:
            super().__init__(allocate, deallocate)
            seen.update(allocate=allocate, deallocate=deallocate)

    monkeypatch.setattr(rmm.mr, "CallbackMemoryResource", Capturing)
    with bridge.install(cuda_stats):
        allocate, deallocate = seen["allocate"], seen["deallocate"]
        for stream in ((), (None,), (0,), (rmm.pylibrmm.stream.DEFAULT_STREAM,)):
            ptr = allocate(256, *stream)
            assert ptr != 0 and cuda_stats.current_bytes == 256
            deallocate(ptr, 256, *stream)
    assert (cuda_stats.allocations, cuda_stats.current_bytes) == (4, 0)


def test_both_arrows_for_rmm_are_a_cycle(rmm_stack: RecordingRmmStack, cuda_stats: devmm.StatisticsAdaptor) -> None:
    consumer = devmm.StatisticsAdaptor(RmmMemoryResource(rmm_stack.mr))
    with pytest.raises(ValueError, match="would create an allocation cycle"):
        bridge.install(consumer)
    with bridge.install(cuda_stats):
        with pytest.raises(ValueError, match="is devmm's own"):
            RmmMemoryResource()
    with pytest.raises(ValueError, match="rmm serves cuda/rocm devices"):
        bridge.install(devmm.mrs.cpu.MallocMemoryResource())


def test_uninstall_out_of_order_is_refused(cuda_stats: devmm.StatisticsAdaptor) -> None:
    before = rmm.mr.get_per_device_resource(0)
    first = bridge.install(cuda_stats)
    second = bridge.install(devmm.StatisticsAdaptor(CudaRuntimeMemoryResource()))
    with pytest.raises(RuntimeError, match="reverse order of install"):
        first.uninstall()
    assert first.installed
    second.uninstall()
    first.uninstall()
    assert rmm.mr.get_per_device_resource(0) is before


def test_hipmm_round_trips_over_rocm(monkeypatch: pytest.MonkeyPatch) -> None:
    # hipMM's Python API is rmm's: with the rmm module reported as hipMM's,
    # the same rmm resources stand in for a hipMM stack on a ROCm device.
    real = importlib.metadata.packages_distributions
    monkeypatch.setattr(
        importlib.metadata, "packages_distributions", lambda: {**real(), "rmm": ["hipmm"]}
    )
    rocm0 = devmm.Device.from_string("rocm:0")
    stack = RecordingRmmStack(HipRuntimeMemoryResource(rocm0))
    mr = HipmmMemoryResource(stack.mr, rocm0)
    assert mr.consumes == "hipmm"
    buffer = devmm.DeviceBuffer(256, mr=mr)
    buffer.copy_from_host(b"hipMM")
    assert bytes(buffer.copy_to_host(nbytes=5)) == b"hipMM" and len(stack.live) == 1
    buffer.free()
    assert stack.live == {}
    with pytest.raises(devmm.RuntimeUnavailableError, match="not cuda"):
        RmmMemoryResource()


def test_a_refusal_reaches_rmm_callers_as_memory_error() -> None:
    limited = devmm.LimitingAdaptor(CudaRuntimeMemoryResource(), limit_bytes=64)
    with bridge.install(limited):
        with pytest.raises(MemoryError, match="would exceed the 64-byte limit"):
            rmm.DeviceBuffer(size=100, mr=rmm.mr.get_per_device_resource(0))
    assert limited.used_bytes == 0
