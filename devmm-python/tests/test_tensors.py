"""empty, empty_like and Tensor."""

import numpy as np
import pytest

import devmm


def test_empty_fields(stats: devmm.StatisticsAdaptor) -> None:
    policy = devmm.ColMajor()
    t = devmm.empty((2, 3), "int16", layout=policy, mr=stats)
    assert (t.shape, t.strides, t.ndim) == ((2, 3), (1, 2), 2)
    assert t.dtype == devmm.DType.from_string("int16")
    assert t.device == devmm.Device.from_string("cpu")
    assert t.layout.policy is policy
    assert t.buffer is t.buffer
    assert t.buffer.mr is stats and stats.current_bytes == 12
    assert t.data_ptr == t.buffer.ptr and t.byte_offset == 0
    assert not t.read_only and t.to_read_only().read_only
    assert repr(t) == "Tensor(shape=[2, 3], strides=[1, 2], dtype=int16, device=cpu:0)"
    t.buffer.free()
    assert stats.current_bytes == 0


def test_default_layout_is_row_major() -> None:
    t = devmm.empty(5, devmm.DType.from_string("float64"))
    assert (t.shape, t.strides) == ((5,), (1,))
    assert isinstance(t.layout.policy, devmm.RowMajor)


def test_padded_layouts_are_aligned_inside_the_buffer() -> None:
    t = devmm.empty((4, 3), "float32", layout=devmm.Aligned(devmm.RowMajor(), 128, 1024))
    assert t.strides == (32, 1)
    assert t.data_ptr % 1024 == 0
    assert t.buffer.size >= t.layout.required_nbytes + t.byte_offset


def test_empty_like_tensors_and_numpy_arrays() -> None:
    base = devmm.empty((3, 2), "uint8")
    like = devmm.empty_like(base, layout=devmm.ColMajor())
    assert (like.shape, like.dtype, like.strides) == ((3, 2), base.dtype, (1, 3))
    for dtype in ("bool", "int8", "float64", "complex64"):
        arr = np.zeros((2, 5), dtype=dtype)
        t = devmm.empty_like(arr)
        assert t.shape == (2, 5) and t.dtype == devmm.DType.from_string(dtype)


def test_empty_like_needs_a_dlpack_producer() -> None:
    with pytest.raises(AttributeError):
        devmm.empty_like([1, 2, 3])


def test_empty_argument_errors() -> None:
    with pytest.raises(ValueError, match="float8"):
        devmm.empty((2,), "float8")
    with pytest.raises(ValueError, match="overflows"):
        devmm.empty((1 << 40, 1 << 40), "float64")
    with pytest.raises(MemoryError):
        devmm.empty((1 << 60,), "uint8")
    with pytest.raises(ValueError, match="allocates on cpu:0"):
        devmm.empty((2,), "uint8", device="cuda:0", mr=devmm.get_current_memory_resource())
    with pytest.raises(TypeError):
        devmm.empty((2,), "uint8", layout="row")  # type: ignore[arg-type]


def test_zero_size_tensors() -> None:
    t = devmm.empty((0, 4), "float32")
    assert t.shape == (0, 4) and t.data_ptr == 0
