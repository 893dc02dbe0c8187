"""Interchange with PyTorch on the CPU (the PyPI build runs its CPU tensors
without a driver): DLPack both ways, zero-copy, with lifetimes and devmm's
foreign-memory accounting checked."""

from __future__ import annotations

import gc
import logging

import numpy as np
import torch

import devmm


def test_torch_consumes_a_devmm_tensor_zero_copy() -> None:
    t = devmm.empty((2, 3), "float32")
    view = torch.from_dlpack(t)
    assert view.data_ptr() == t.data_ptr
    assert view.shape == (2, 3) and view.dtype == torch.float32
    view.fill_(2.5)
    # The same bytes, seen through NumPy's view of the devmm tensor.
    assert np.asarray(t).tolist() == [[2.5] * 3] * 2


def test_torch_keeps_a_freed_buffer_alive_until_it_lets_go() -> None:
    stats = devmm.StatisticsAdaptor(devmm.mrs.cpu.MallocMemoryResource())
    t = devmm.empty((1024,), "int32", mr=stats)
    view = torch.from_dlpack(t)
    t.buffer.free()  # deferred: the export is live
    assert stats.current_bytes == 4096
    view[:] = 7
    assert int(view.sum()) == 7 * 1024
    del view
    gc.collect()
    assert stats.current_bytes == 0


def test_torch_padded_strides_arrive_in_elements() -> None:
    layout = devmm.Aligned(devmm.RowMajor(), unit_stride_alignment=128, base_alignment=256)
    t = devmm.empty((4, 3), "float32", layout=layout)
    assert torch.from_dlpack(t).stride() == (32, 1)


def test_devmm_imports_a_torch_tensor_as_foreign_memory() -> None:
    before = devmm.foreign_memory()
    source = torch.arange(12, dtype=torch.int64).reshape(3, 4)
    imported = devmm.from_dlpack(source)
    assert imported.data_ptr == source.data_ptr()
    assert imported.shape == (3, 4) and imported.strides == (4, 1)
    assert imported.dtype == devmm.DType.from_string("int64")
    during = devmm.foreign_memory()
    assert during["live_count"] == before["live_count"] + 1
    assert during["live_bytes"] == before["live_bytes"] + 12 * 8
    # A zero-copy view of torch's memory, through devmm, into NumPy.
    assert np.asarray(imported).tolist() == source.tolist()
    del imported
    gc.collect()
    assert devmm.foreign_memory()["live_bytes"] == before["live_bytes"]


def test_a_torch_round_trip_is_the_same_memory() -> None:
    t = devmm.empty((5,), "float64")
    back = devmm.from_dlpack(torch.from_dlpack(t))
    assert back.data_ptr == t.data_ptr
    torch.from_dlpack(back).copy_(torch.arange(5, dtype=torch.float64))
    assert np.asarray(t).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_a_round_trip_drops_through_torch_without_the_gil() -> None:
    # torch runs a DLPack deleter with the GIL released, here inside the
    # deallocation of a devmm tensor (its foreign import of torch's view):
    # the export's release, the logger and the Python callbacks below must
    # take the GIL back themselves.
    calls: list[str] = []
    inner = devmm.mrs.cpu.MallocMemoryResource()

    def alloc(nbytes: int, stream: object) -> int:
        calls.append("alloc")
        return inner.allocate(nbytes)

    def dealloc(ptr: int, nbytes: int, stream: object) -> None:
        calls.append("dealloc")
        inner.deallocate(ptr, nbytes)

    records: list[str] = []

    class Handler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.op)  # type: ignore[attr-defined]

    logger = logging.getLogger("devmm.test.torch_round_trip")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(Handler())
    callbacks = devmm.CallbackMemoryResource(alloc, dealloc, alignment=64, dereferenceable=True)
    mr = devmm.LoggingAdaptor(callbacks, logger=logger)

    def round_trip() -> None:
        t = devmm.empty((5,), "float64", mr=mr, layout=devmm.RowMajor())
        back = devmm.from_dlpack(torch.from_dlpack(t))
        torch.from_dlpack(back).fill_(1.0)
        del t, back

    round_trip()
    gc.collect()
    assert calls == ["alloc", "dealloc"]
    assert records == ["allocate", "deallocate"]
