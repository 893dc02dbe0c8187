"""The framework bridges' tests, run by scripts/test-python.sh in a pytest
session of their own: devmm's CUDA and ROCm runtimes are pointed at the
repository's fake libraries (host memory behind CUDA and HIP entry points)
before devmm loads a runtime, which the main suite must not see.

Every framework here (torch, cupy, numba-cuda, rmm, dask/distributed) is
installed by scripts/requirements-bridges.txt; a missing one fails the
collection of its module, it never skips."""

from __future__ import annotations

import ctypes
import os

import pytest

_FAKES = {"DEVMM_TEST_FAKE_CUDART": "DEVMM_CUDART_PATH", "DEVMM_TEST_FAKE_HIP": "DEVMM_HIP_PATH"}
for _fake, _path in _FAKES.items():
    if not os.environ.get(_fake):
        raise pytest.UsageError(
            f"{_fake} is not set: run these tests through scripts/test-python.sh, which builds "
            f"the fake drivers and names them"
        )
    os.environ[_path] = os.environ[_fake]

import devmm  # noqa: E402  (only once the fakes are named)


class FakeDriver:
    """The control API of a fake driver library, on the instance devmm loaded."""

    def __init__(self, path: str) -> None:
        self._lib = ctypes.CDLL(path)
        self._lib.fake_set_memory_limit.argtypes = [ctypes.c_int, ctypes.c_uint64]
        self._lib.fake_call_count.argtypes = [ctypes.c_char_p]
        self._lib.fake_call_count.restype = ctypes.c_uint64

    def set_memory_limit(self, device: int, nbytes: int) -> None:
        assert self._lib.fake_set_memory_limit(device, nbytes) == 0

    def calls(self, name: str) -> int:
        return int(self._lib.fake_call_count(name.encode()))


@pytest.fixture(scope="session")
def fake_cudart() -> FakeDriver:
    return FakeDriver(os.environ["DEVMM_TEST_FAKE_CUDART"])


@pytest.fixture
def cuda0() -> devmm.Device:
    return devmm.Device.from_string("cuda:0")


@pytest.fixture
def cuda_stats(cuda0: devmm.Device) -> devmm.StatisticsAdaptor:
    from devmm.mrs.cuda import CudaRuntimeMemoryResource

    return devmm.StatisticsAdaptor(CudaRuntimeMemoryResource(cuda0))
