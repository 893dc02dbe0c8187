"""DLPack 1.3's C exchange API (``__dlpack_c_exchange_api__``), against code
no one here wrote: apache-tvm-ffi's tensor and ``from_dlpack`` consume
devmm's table and publish their own, which ``devmm.from_dlpack`` uses; and
each entry of devmm's table called as a C consumer calls it (ctypes)."""

from __future__ import annotations

import ctypes
import gc
import weakref

import numpy as np
import pytest
import tvm_ffi

import devmm
from devmm._dlpack import _abi

TENSOR_API = _abi.DLPackExchangeAPI.of(devmm.Tensor)
BUFFER_API = _abi.DLPackExchangeAPI.of(devmm.DeviceBuffer)


def export(api: _abi.DLPackExchangeAPI, obj: object) -> ctypes._Pointer[_abi.DLManagedTensorVersioned]:
    out = ctypes.POINTER(_abi.DLManagedTensorVersioned)()
    assert api.managed_tensor_from_py_object_no_sync(obj, ctypes.byref(out)) == 0
    return out


def to_object(api: _abi.DLPackExchangeAPI, managed: object) -> object:
    """``managed_tensor_to_py_object_no_sync``, taking the new reference it returns."""
    out = ctypes.c_void_p()
    assert api.managed_tensor_to_py_object_no_sync(managed, ctypes.byref(out)) == 0
    made = ctypes.cast(out.value, ctypes.py_object).value
    ctypes.pythonapi.Py_DecRef(ctypes.py_object(made))  # the entry's reference, now `made`'s
    return made


@pytest.mark.parametrize("api", [TENSOR_API, BUFFER_API], ids=["Tensor", "DeviceBuffer"])
def test_both_types_publish_a_dlpack_1_3_table_on_the_type(api: _abi.DLPackExchangeAPI) -> None:
    assert type(devmm.Tensor.__dlpack_c_exchange_api__).__name__ == "PyCapsule"
    assert (api.header.version.major, api.header.version.minor) == _abi.DLPACK_EXCHANGE_API_VERSION == (1, 3)
    assert api.header.prev_api is None
    for entry in ("managed_tensor_allocator", "managed_tensor_from_py_object_no_sync",
                  "managed_tensor_to_py_object_no_sync", "current_work_stream"):
        assert getattr(api, entry), entry
    # A buffer's 1-D dims are made per export: nothing to lend, so NULL.
    assert bool(api.dltensor_from_py_object_no_sync) == (api is TENSOR_API)


def test_tvm_ffi_takes_a_devmm_tensor_through_the_table_zero_copy_and_deletes_once() -> None:
    stats = devmm.StatisticsAdaptor(devmm.mrs.cpu.MallocMemoryResource())
    t = devmm.empty((2, 3), "float32", mr=stats)
    np.asarray(t)[...] = np.arange(6).reshape(2, 3)
    x = tvm_ffi.from_dlpack(t)
    assert x.data_ptr() == t.data_ptr and tuple(x.shape) == (2, 3)
    assert np.from_dlpack(x).tolist() == [[0, 1, 2], [3, 4, 5]]
    assert t.buffer.live_exports == 1
    t.buffer.free()  # deferred while tvm holds the export
    assert stats.current_bytes > 0
    del x
    gc.collect()
    assert t.buffer.live_exports == 0 and stats.current_bytes == 0


def test_a_devmm_buffer_goes_to_tvm_ffi_as_its_bytes() -> None:
    b = devmm.DeviceBuffer(size=16)
    x = tvm_ffi.from_dlpack(b)
    assert x.data_ptr() == b.ptr and tuple(x.shape) == (16,) and str(x.dtype) == "uint8"
    del x
    assert b.live_exports == 0


class ExchangeOnly(tvm_ffi.core.DLTensorTestWrapper):
    """tvm-ffi's producer with a C exchange table, whose ``__dlpack__`` must not be called."""

    def __dlpack__(self, **kwargs: object) -> object:
        raise AssertionError("devmm.from_dlpack called __dlpack__ though the type has a table")


def test_devmm_imports_a_tvm_ffi_producer_through_its_table_and_releases_it_once() -> None:
    arr = np.arange(12, dtype=np.int32).reshape(3, 4)
    released = []
    weakref.finalize(arr, released.append, True)
    address = arr.ctypes.data
    producer = ExchangeOnly(tvm_ffi.from_dlpack(arr))
    d = devmm.from_dlpack(producer)
    assert (d.shape, str(d.dtype), d.data_ptr) == ((3, 4), "int32", address)
    assert np.asarray(d).tolist() == np.arange(12).reshape(3, 4).tolist()
    del arr, producer
    gc.collect()
    assert released == []  # devmm still holds tvm's export
    del d
    gc.collect()
    assert released == [True]


def test_devmm_imports_its_own_tensor_through_its_table() -> None:
    t = devmm.empty((5,), "uint8")
    d = devmm.from_dlpack(t)
    assert d.data_ptr == t.data_ptr and t.buffer.live_exports == 1
    del d
    assert t.buffer.live_exports == 0


def test_refusals_are_buffer_errors_and_leave_no_export() -> None:
    t = devmm.empty((4,), "float32")
    t.buffer.free()
    out = ctypes.POINTER(_abi.DLManagedTensorVersioned)()
    with pytest.raises(BufferError, match="freed"):
        TENSOR_API.managed_tensor_from_py_object_no_sync(t, ctypes.byref(out))
    with pytest.raises(BufferError, match="freed"):
        tvm_ffi.from_dlpack(t)
    view = _abi.DLTensor()
    with pytest.raises(BufferError, match="read-only"):
        TENSOR_API.dltensor_from_py_object_no_sync(devmm.empty((2,), "int8").to_read_only(), ctypes.byref(view))
    with pytest.raises(TypeError, match="Tensor and DeviceBuffer"):
        TENSOR_API.managed_tensor_from_py_object_no_sync(np.zeros(3), ctypes.byref(out))


def test_a_read_only_tensor_exports_flagged_read_only() -> None:
    t = devmm.empty((3,), "int16").to_read_only()
    managed = export(TENSOR_API, t)
    assert managed.contents.flags & _abi.DLPACK_FLAG_BITMASK_READ_ONLY
    managed.contents.deleter(managed)
    assert t.buffer.live_exports == 0


def test_the_borrowed_dltensor_describes_the_tensor_in_place() -> None:
    t = devmm.empty((3, 4), "float64", layout=devmm.Aligned(devmm.RowMajor(), 64, 64))
    view = _abi.DLTensor()
    assert TENSOR_API.dltensor_from_py_object_no_sync(t, ctypes.byref(view)) == 0
    assert view.data == t.data_ptr and (view.device.device_type, view.device.device_id) == (1, 0)
    assert (view.dtype.code, view.dtype.bits, view.dtype.lanes) == (2, 64, 1)
    assert [view.shape[i] for i in range(view.ndim)] == [3, 4]
    assert [view.strides[i] for i in range(view.ndim)] == list(t.strides)
    assert t.buffer.live_exports == 0  # non-owning


def prototype(shape: tuple[int, ...], code: int = 2, bits: int = 32, device: tuple[int, int] = (1, 0)) -> _abi.DLTensor:
    dims = (ctypes.c_int64 * len(shape))(*shape)
    made = _abi.DLTensor(None, _abi.DLDevice(*device), len(shape), _abi.DLDataType(code, bits, 1), dims, None, 0)
    made._dims = dims  # keep the shape alive with the prototype
    return made


def test_the_allocator_allocates_through_the_current_resource_and_to_py_object_wraps_it() -> None:
    stats = devmm.StatisticsAdaptor(devmm.get_current_memory_resource())
    previous = devmm.get_current_memory_resource()
    devmm.set_current_memory_resource(stats)
    try:
        out = ctypes.POINTER(_abi.DLManagedTensorVersioned)()
        errors = []
        on_error = _abi.DLPackExchangeAPI.SetError(lambda ctx, kind, message: errors.append((kind, message)))
        assert TENSOR_API.managed_tensor_allocator(ctypes.byref(prototype((2, 3))), ctypes.byref(out), None, on_error) == 0
        assert errors == [] and stats.current_bytes >= 24
        managed = out.contents
        assert (managed.version.major, managed.version.minor) == (1, 1)
        assert [managed.dl_tensor.strides[i] for i in range(2)] == [3, 1]
        address = managed.dl_tensor.data
        t = to_object(TENSOR_API, out)
        assert isinstance(t, devmm.Tensor) and (t.shape, str(t.dtype), t.data_ptr) == ((2, 3), "float32", address)
        del t
        gc.collect()
        assert stats.current_bytes == 0  # the allocator's deleter ran, once
        bad = prototype((2,), code=77)
        assert TENSOR_API.managed_tensor_allocator(ctypes.byref(bad), ctypes.byref(out), None, on_error) == -1
        assert len(errors) == 1 and errors[0][0] == b"BufferError" and b"dtype code 77" in errors[0][1]
    finally:
        devmm.set_current_memory_resource(previous)


def test_to_py_object_refuses_what_devmm_cannot_read_and_deletes_it() -> None:
    out = ctypes.POINTER(_abi.DLManagedTensorVersioned)()
    on_error = _abi.DLPackExchangeAPI.SetError(lambda ctx, kind, message: None)
    assert TENSOR_API.managed_tensor_allocator(ctypes.byref(prototype((4,))), ctypes.byref(out), None, on_error) == 0
    out.contents.version.major = 2  # a struct of a major devmm does not read
    target = ctypes.c_void_p()
    with pytest.raises(BufferError, match="major version"):
        TENSOR_API.managed_tensor_to_py_object_no_sync(out, ctypes.byref(target))
    assert target.value is None


def test_the_current_work_stream_of_the_host_is_none() -> None:
    stream = ctypes.c_void_p(0x1234)
    assert TENSOR_API.current_work_stream(1, 0, ctypes.byref(stream)) == 0
    assert stream.value is None
    with pytest.raises(BufferError, match=r"DLPack device \(99, 0\)"):
        TENSOR_API.current_work_stream(99, 0, ctypes.byref(stream))
