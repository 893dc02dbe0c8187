"""DLPack 1.3's C exchange API with PyTorch's CPU tensors, both directions:
``devmm.from_dlpack`` through ``torch.Tensor.__dlpack_c_exchange_api__``,
and a devmm export handed to PyTorch's ``managed_tensor_to_py_object_no_sync``
as a C consumer joining the two tables would. Zero-copy, and each
producer's deleter runs exactly once."""

from __future__ import annotations

import ctypes
import gc
import weakref

import pytest
import torch

import devmm
from devmm._dlpack import _abi

TORCH_API = _abi.DLPackExchangeAPI.of(torch.Tensor)
DEVMM_API = _abi.DLPackExchangeAPI.of(devmm.Tensor)


def test_torch_publishes_a_table_devmm_reads() -> None:
    assert (TORCH_API.header.version.major, TORCH_API.header.version.minor) >= (1, 3)
    assert TORCH_API.managed_tensor_from_py_object_no_sync


def test_devmm_imports_a_torch_tensor_through_its_table_and_releases_it_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_python_call(self: torch.Tensor, **kwargs: object) -> object:
        raise AssertionError("devmm.from_dlpack called __dlpack__ though torch.Tensor has a table")

    monkeypatch.setattr(torch.Tensor, "__dlpack__", no_python_call)
    source = torch.arange(12, dtype=torch.float32).reshape(3, 4)[:, 1:]  # strided view
    released: list[bool] = []
    weakref.finalize(source.untyped_storage(), released.append, True)
    address = source.data_ptr()
    before = devmm.foreign_memory()["live_bytes"]
    d = devmm.from_dlpack(source)
    assert (d.shape, d.strides, d.data_ptr) == ((3, 3), (4, 1), address)
    del source
    gc.collect()
    assert released == []  # devmm holds PyTorch's export
    del d
    gc.collect()
    assert released == [True]
    assert devmm.foreign_memory()["live_bytes"] == before


def test_a_devmm_export_becomes_a_torch_tensor_through_both_tables() -> None:
    t = devmm.empty((2, 5), "int64")
    out = ctypes.POINTER(_abi.DLManagedTensorVersioned)()
    assert DEVMM_API.managed_tensor_from_py_object_no_sync(t, ctypes.byref(out)) == 0
    made = ctypes.c_void_p()
    assert TORCH_API.managed_tensor_to_py_object_no_sync(out, ctypes.byref(made)) == 0
    view = ctypes.cast(made.value, ctypes.py_object).value
    ctypes.pythonapi.Py_DecRef(ctypes.py_object(view))  # PyTorch's new reference, now `view`'s
    assert isinstance(view, torch.Tensor)
    assert (view.data_ptr(), tuple(view.shape), view.dtype) == (t.data_ptr, (2, 5), torch.int64)
    view.fill_(7)
    assert t.buffer.live_exports == 1
    t.buffer.free()  # deferred: PyTorch holds the export
    assert t.buffer.closed and t.buffer.live_exports == 1
    del view
    gc.collect()
    assert t.buffer.live_exports == 0


def test_a_freed_devmm_tensor_is_refused_with_a_buffer_error() -> None:
    t = devmm.empty((3,), "float32")
    t.buffer.free()
    out = ctypes.POINTER(_abi.DLManagedTensorVersioned)()
    with pytest.raises(BufferError, match="freed"):
        DEVMM_API.managed_tensor_from_py_object_no_sync(t, ctypes.byref(out))
    with pytest.raises(BufferError, match="freed"):
        torch.from_dlpack(t)
