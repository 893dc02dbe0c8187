"""Error messages carry the key phrase the seed's (upstream's) message for
the same condition has, so code that matches on it keeps working, and the
exception type is the seed's."""

import os
import subprocess
import sys
from collections.abc import Callable

import numpy as np
import pytest

import devmm
from devmm.integrations import cupy as devmm_cupy
from devmm.integrations import numpy as devmm_numpy
from devmm.integrations import rmm as devmm_rmm
from devmm.mrs.cpu import MallocMemoryResource, NumpyHandlerMemoryResource


_F32 = devmm.DType.from_string("float32")


def _gpu_resource() -> devmm.CallbackMemoryResource:
    return devmm.CallbackMemoryResource(lambda n, s: 0, lambda p, n, s: None, "cuda:0")


# Device


def test_unknown_device_type() -> None:
    with pytest.raises(ValueError, match="unknown device type") as raised:
        devmm.Device.from_string("gpu:0")
    assert "cuda" in str(raised.value)  # says what is accepted


def test_malformed_device_string() -> None:
    with pytest.raises(ValueError, match="malformed device string") as raised:
        devmm.Device.from_string("cuda:x")
    assert '"cuda:1"' in str(raised.value)


@pytest.mark.parametrize("index", [-1, 2**31])
def test_device_index_out_of_range(index: int) -> None:
    with pytest.raises(ValueError, match="out of range") as raised:
        devmm.Device(devmm.DeviceType.CUDA, index)
    assert "2147483647" in str(raised.value)


def test_device_string_index_out_of_range() -> None:
    with pytest.raises(ValueError, match="out of range"):
        devmm.Device.from_string("cuda:2147483648")


# DType


def test_unknown_dtype_string() -> None:
    with pytest.raises(ValueError, match="unknown dtype string") as raised:
        devmm.DType.from_string("float33")
    assert "float32" in str(raised.value)


def test_dtype_kind_without_dlpack_encoding() -> None:
    with pytest.raises(ValueError, match="has no DLPack DLDataType encoding"):
        devmm.DType.from_any(np.dtype("datetime64[s]"))


def test_uninterpretable_dtype_is_type_error() -> None:
    with pytest.raises(TypeError, match="cannot interpret"):
        devmm.DType.from_any(object())


# Layouts


def test_not_a_permutation() -> None:
    with pytest.raises(ValueError, match="is not a permutation of"):
        devmm.Permuted((0, 0))


def test_permutation_does_not_match_shape() -> None:
    with pytest.raises(ValueError, match="does not match"):
        devmm.Permuted((1, 0))((2, 3, 4), _F32, devmm.Device.from_string("cpu"))


@pytest.mark.parametrize("alignments", [{"unit_stride_alignment": 0}, {"base_alignment": 0}])
def test_alignments_must_be_positive(alignments: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="alignments must be positive") as raised:
        devmm.Aligned(devmm.RowMajor(), **alignments)
    assert next(iter(alignments)) in str(raised.value)


def test_layout_rank_mismatch() -> None:
    with pytest.raises(ValueError, match="rank mismatch"):
        devmm.Layout((2, 3), (1,), _F32)


def test_layout_strides_must_be_positive() -> None:
    with pytest.raises(ValueError, match="strides must be positive"):
        devmm.Layout((2, 3), (0, 1), _F32)


def test_layout_strides_overlap() -> None:
    with pytest.raises(ValueError, match="overlap"):
        devmm.Layout((2, 3), (2, 1), _F32)


def test_shape_extents_must_be_non_negative() -> None:
    with pytest.raises(ValueError, match="shape extents must be non-negative"):
        devmm.RowMajor()((2, -1), _F32, devmm.Device.from_string("cpu"))


# Integrations


def test_install_cycle_is_an_allocation_cycle() -> None:
    with pytest.raises(ValueError, match="through NumPy's own handler .* allocation cycle"):
        devmm_numpy.install(devmm.StatisticsAdaptor(NumpyHandlerMemoryResource()))


def test_numpy_install_needs_a_cpu_resource() -> None:
    with pytest.raises(ValueError, match="must live on the cpu device") as raised:
        devmm_numpy.install(_gpu_resource())
    assert "cuda:0" in str(raised.value)


def test_cupy_install_needs_a_cuda_resource() -> None:
    with pytest.raises(ValueError, match="must live on a cuda device") as raised:
        devmm_cupy.install(MallocMemoryResource())
    assert "cpu:0" in str(raised.value)


def test_rmm_install_needs_a_gpu_resource() -> None:
    with pytest.raises(ValueError, match="rmm serves cuda/rocm devices") as raised:
        devmm_rmm.install(MallocMemoryResource())
    assert "cpu:0" in str(raised.value)


def test_cupy_not_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(devmm.RuntimeUnavailableError, match="cupy is not importable"):
        devmm_cupy.install(_gpu_resource())


def test_rmm_not_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "rmm", None)
    with pytest.raises(devmm.RuntimeUnavailableError, match="no rmm module targeting cuda"):
        devmm_rmm.install(_gpu_resource())


def test_numba_not_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    from devmm.integrations import numba as devmm_numba

    monkeypatch.setitem(sys.modules, "numba", None)
    monkeypatch.setitem(sys.modules, "numba.cuda", None)
    monkeypatch.setitem(sys.modules, "numba.cuda.cudadrv.driver", None)
    with pytest.raises(devmm.RuntimeUnavailableError, match="numba is not importable"):
        devmm_numba.install()


# Buffers and DLPack exports


def test_use_after_free() -> None:
    buffer = devmm.DeviceBuffer(16, mr=MallocMemoryResource(), stream=devmm.runtime_for("cpu").default_stream("cpu"))
    buffer.free()
    with pytest.raises(ValueError, match="use-after-free") as raised:
        buffer.copy_to_host()
    assert "16 bytes on cpu:0" in str(raised.value)


def test_exporting_a_freed_buffer() -> None:
    tensor = devmm.empty((2, 3), "float32")
    tensor.buffer.free()
    with pytest.raises(BufferError, match=r"cannot export a freed DeviceBuffer \(use-after-free\)"):
        tensor.__dlpack__()


def test_cross_device_export() -> None:
    with pytest.raises(BufferError, match="cross-device export is not supported") as raised:
        devmm.empty((2, 3), "float32").__dlpack__(dl_device=(2, 0))
    assert "cpu:0" in str(raised.value)
    assert 'call Tensor.to("cuda:0") for a copy on cuda:0 and export that' in str(raised.value)


@pytest.mark.parametrize("max_version", [None, (0, 8)])
def test_read_only_legacy_export(max_version: tuple[int, int] | None) -> None:
    tensor = devmm.empty((2, 3), "float32")
    read_only = devmm.Tensor(tensor.buffer, tensor.dtype, tensor.shape, tensor.layout, read_only=True)
    with pytest.raises(
        BufferError,
        match=r"the legacy DLManagedTensor cannot express the read-only flag; request max_version >= \(1, 0\) "
        "or export a writable tensor",
    ) as raised:
        read_only.__dlpack__(max_version=max_version)
    assert f"max_version={max_version}" in str(raised.value)


def test_cpu_consumer_stream() -> None:
    with pytest.raises(BufferError, match="CPU consumers must pass stream=None or -1"):
        devmm.empty((2, 3), "float32").__dlpack__(stream=5)


@pytest.mark.parametrize(
    ("argument", "phrase"),
    [
        ({"stream": "x"}, "stream must be None or an int per the DLPack protocol, got 'x'"),
        ({"max_version": (1,)}, r"max_version must be None or a \(major, minor\) pair of non-negative ints, got \(1,\)"),
    ],
)
def test_malformed_dlpack_arguments(argument: dict[str, object], phrase: str) -> None:
    with pytest.raises(BufferError, match=phrase):
        devmm.empty((2, 3), "float32").__dlpack__(**argument)


# Resources


def _cpu_stream() -> devmm.Stream:
    return devmm.runtime_for("cpu").default_stream("cpu")


def test_host_resource_requires_a_cpu_device() -> None:
    with pytest.raises(ValueError, match="requires a cpu device") as raised:
        MallocMemoryResource(devmm.Device.from_string("cuda:0"))
    assert "cuda:0" in str(raised.value)


def test_out_of_memory_failed_to_allocate() -> None:
    with pytest.raises(MemoryError, match="failed to allocate 4611686018427387904 bytes on cpu:0"):
        MallocMemoryResource().allocate(2**62, _cpu_stream())


def test_limit_would_be_exceeded() -> None:
    limited = devmm.LimitingAdaptor(MallocMemoryResource(), limit_bytes=64)
    with pytest.raises(
        MemoryError, match=r"allocation of 65 bytes on cpu:0 would exceed the 64-byte limit \(0 bytes in use\) in "
    ) as raised:
        limited.allocate(65, _cpu_stream())
    assert "LimitingAdaptor -> MallocMemoryResource" in str(raised.value)


def test_size_mismatch() -> None:
    mr, stream = MallocMemoryResource(), _cpu_stream()
    ptr = mr.allocate(16, stream)
    with pytest.raises(ValueError, match="size mismatch freeing") as raised:
        mr.deallocate(ptr, 8, stream)
    assert "allocated with 16 bytes" in str(raised.value)
    mr.deallocate(ptr, 16, stream)


def test_double_and_foreign_frees_are_not_live_allocations() -> None:
    mr, stream = MallocMemoryResource(), _cpu_stream()
    ptr = mr.allocate(16, stream)
    mr.deallocate(ptr, 16, stream)
    with pytest.raises(ValueError, match="double-free: the pointer is not a live allocation"):
        mr.deallocate(ptr, 16, stream)
    with pytest.raises(ValueError, match="foreign-free: the pointer is not a live allocation"):
        mr.deallocate(0x1000, 16, stream)


def test_negative_nbytes_is_named_negative() -> None:
    with pytest.raises(ValueError, match="nbytes must be a non-negative integer") as raised:
        MallocMemoryResource().allocate(-1, _cpu_stream())
    assert "not -1" in str(raised.value)


def test_unknown_runtime_override() -> None:
    env = dict(os.environ, DEVMM_RUNTIME="bogus")
    done = subprocess.run([sys.executable, "-c", "import devmm"], env=env, capture_output=True, text=True)
    assert done.returncode != 0
    assert 'RuntimeUnavailableError: runtime "bogus" is unavailable: DEVMM_RUNTIME="bogus" names no registered device runtime' in done.stderr, done.stderr


def test_copy_that_does_not_fit() -> None:
    buffer = devmm.DeviceBuffer(16, mr=MallocMemoryResource(), stream=_cpu_stream())
    with pytest.raises(ValueError, match="cannot copy 32 bytes") as raised:
        buffer.copy_from_host(b"x" * 32)
    assert "16-byte buffer on cpu:0" in str(raised.value)


def test_empty_with_a_resource_of_another_device() -> None:
    with pytest.raises(ValueError, match="mr lives on cpu:0") as raised:
        devmm.empty((2,), "float32", device="cuda:0", mr=MallocMemoryResource())
    assert "cuda:0" in str(raised.value)


def test_stream_of_another_device(fake_library: Callable[[str], str]) -> None:
    # In a fresh interpreter: a loaded CUDA runtime stays for the process.
    env = dict(os.environ, DEVMM_CUDART_PATH=fake_library("DEVMM_TEST_FAKE_CUDART"))
    script = """
import devmm
from devmm.mrs.cpu import MallocMemoryResource
cuda = devmm.Device.from_string("cuda:0")
stream = devmm.runtime_for(cuda).default_stream(cuda)
try:
    devmm.DeviceBuffer(16, mr=MallocMemoryResource(), stream=stream)
except ValueError as e:
    print(e)
"""
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("stream device cuda:0 does not match"), done.stdout
    assert "pass a stream of cpu:0" in done.stdout


# The cpu runtime


def test_cpu_runtime_has_a_single_stream() -> None:
    cpu = devmm.Device.from_string("cpu")
    with pytest.raises(ValueError, match="the CPU has a single stream with handle 0, got handle 5"):
        devmm.runtime_for(cpu).wrap_stream(cpu, 5)


def test_cpu_runtime_serves_cpu_devices() -> None:
    with pytest.raises(ValueError, match="serves cpu devices") as raised:
        devmm.runtime_for("cpu").default_stream(devmm.Device.from_string("cuda:0"))
    assert "cuda:0" in str(raised.value)


# Bridge resources


def test_cupy_resource_requires_a_cuda_device() -> None:
    from devmm.mrs.cuda import CupyAllocatorMemoryResource

    with pytest.raises(ValueError, match="requires a cuda device") as raised:
        CupyAllocatorMemoryResource(device=devmm.Device.from_string("cpu"))
    assert "cpu:0" in str(raised.value)


def test_rmm_resource_without_rmm(monkeypatch: pytest.MonkeyPatch) -> None:
    from devmm.mrs.cuda import RmmMemoryResource

    monkeypatch.setitem(sys.modules, "rmm", None)
    with pytest.raises(devmm.RuntimeUnavailableError, match="rmm is not importable"):
        RmmMemoryResource()
