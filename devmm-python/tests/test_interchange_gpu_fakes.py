"""Interchange on GPU memory over the repository's fake CUDA runtime and
HIP (host memory behind device addresses, calls recorded): the CUDA Array
Interface as CuPy and Numba read it (checked as dictionaries), DLPack
import with a stream hand-off, rmm's stream surface and raw copies.
scripts/test-python.sh builds the fakes and names them in
DEVMM_TEST_FAKE_CUDART / DEVMM_TEST_FAKE_HIP."""

import os
from collections.abc import Callable
import subprocess
import sys
import textwrap

import pytest

COMMON = textwrap.dedent(
    """
    import gc
    import numpy as np
    import devmm
    gpu = devmm.Device.from_string("{device}:0")
    rt = devmm.runtime_for(gpu)

    # rmm's stream surface.
    assert rt.default_stream(gpu).is_default()
    for which in (devmm.DEFAULT, devmm.LEGACY_DEFAULT, devmm.PER_THREAD_DEFAULT):
        assert rt.stream(gpu, which).is_default()
    created = rt.create_stream(gpu)
    assert not created.is_default()
    pool = devmm.StreamPool(4, devmm.StreamFlags.NON_BLOCKING, device=gpu)
    handles = {{pool.get_stream().handle for _ in range(8)}}
    assert len(handles) == 4 and 0 not in handles
    assert pool.get_stream(1).handle in handles
    assert not pool.get_stream(0).is_default()

    # Raw copies: synchronous on the default stream, ordered on another.
    src = devmm.DeviceBuffer.to_device(b"abcdef", device=gpu)
    dst = devmm.DeviceBuffer(6, device=gpu)
    devmm.copy_host_to_ptr(b"\\0" * 6, dst.ptr, stream=rt.default_stream(gpu))
    devmm.copy_device_to_ptr(src.ptr, dst.ptr, 3, stream=created)
    created.synchronize()
    hb = bytearray(6)
    devmm.copy_ptr_to_host(dst.ptr, hb, stream=rt.default_stream(gpu))
    assert hb == bytearray(b"abc\\0\\0\\0"), hb
    assert dst.copy_to_host(offset=1, nbytes=2, stream=created).tolist() == [98, 99]

    # DLPack import of a device tensor, with the producer ordered before
    # our stream; the import is foreign memory.
    t = devmm.empty((2, 3), "int32", device=gpu)
    before = devmm.foreign_memory()["live_count"]
    imported = devmm.from_dlpack(t, stream=created)
    assert imported.device == gpu and imported.data_ptr == t.data_ptr
    assert imported.buffer.stream == created
    assert devmm.foreign_memory()["live_count"] == before + 1
    assert t.buffer.live_exports == 1
    del imported
    gc.collect()
    assert t.buffer.live_exports == 0
    assert devmm.foreign_memory()["live_count"] == before

    # DLPack 1.3's C exchange API: the current work stream of the device is
    # the runtime's default stream, the one devmm queues work on.
    import ctypes
    from devmm._dlpack import _abi
    api = _abi.DLPackExchangeAPI.of(devmm.Tensor)
    current = ctypes.c_void_p(0x5EED)
    assert api.current_work_stream(t.__dlpack_device__()[0], 0, ctypes.byref(current)) == 0
    assert (current.value or 0) == rt.default_stream(gpu).handle, current

    # Device memory has no host views.
    for attempt in (lambda: memoryview(t), lambda: bytes(src)):
        try:
            attempt()
        except BufferError:
            pass
        else:
            raise AssertionError("device memory must refuse the buffer protocol")
    try:
        t.__array_interface__
    except AttributeError:
        pass
    else:
        raise AssertionError("device memory has no __array_interface__")
    """
)

CUDA_ONLY = textwrap.dedent(
    """
    import devmm.mrs.cuda
    # The CUDA Array Interface, as CuPy and Numba read it.
    s = rt.create_stream(gpu)
    f = devmm.empty((2, 3), "float32", layout=devmm.ColMajor(), device=gpu, stream=s)
    cai = f.__cuda_array_interface__
    assert cai == {{
        "shape": (2, 3), "typestr": "<f4", "data": (f.data_ptr, False),
        "strides": (4, 8), "version": 3, "stream": s.handle, "mask": None,
    }}, cai
    on_default = devmm.empty((4,), "uint8", device=gpu)
    assert on_default.__cuda_array_interface__["stream"] == 1, "the default stream is spelled 1"
    assert on_default.__cuda_array_interface__["strides"] is None
    assert on_default.to_read_only().__cuda_array_interface__["data"] == (on_default.data_ptr, True)
    buf = devmm.DeviceBuffer(10, device=gpu)
    assert buf.__cuda_array_interface__["shape"] == (10,)
    assert buf.__cuda_array_interface__["typestr"] == "|u1"
    assert buf.__cuda_array_interface__["data"] == (buf.ptr, False)
    pinned = devmm.DeviceBuffer(8, mr=devmm.mrs.cuda.CudaPinnedMemoryResource())
    assert pinned.__cuda_array_interface__["shape"] == (8,)
    assert bytes(pinned) is not None and memoryview(pinned).nbytes == 8, "pinned memory is host memory"
    """
)

PLATFORMS = {
    "cuda": dict(env="DEVMM_TEST_FAKE_CUDART", path_var="DEVMM_CUDART_PATH", device="cuda", extra=CUDA_ONLY),
    "rocm": dict(env="DEVMM_TEST_FAKE_HIP", path_var="DEVMM_HIP_PATH", device="rocm", extra=""),
}


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_interchange_against_the_fake_driver(platform: str, fake_library: Callable[[str], str]) -> None:
    p = PLATFORMS[platform]
    library = fake_library(p["env"])
    env = dict(os.environ, **{p["path_var"]: library})
    script = COMMON.format(device=p["device"]) + p["extra"].format() + "\nprint('ok')\n"
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
