"""empty, empty_like and Tensor."""

import gc

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
    assert repr(t) == "Tensor(shape=(2, 3), dtype=int16, device=cpu:0, offset=0, read_only=False)"
    assert repr(t.to_read_only()).endswith("offset=0, read_only=True)")
    t.buffer.free()
    assert stats.current_bytes == 0


def test_default_layout_is_device_optimal(cpu: devmm.Device) -> None:
    # The seed's default, `layout=DeviceOptimal()`: cache-line rows on the host.
    t = devmm.empty((2, 3), "float32")
    assert t.layout.policy == devmm.DeviceOptimal()
    assert t.layout == devmm.DeviceOptimal()((2, 3), "float32", cpu)
    assert t.strides == (16, 1) and t.data_ptr % 64 == 0
    assert devmm.empty(5, devmm.DType.from_string("float64")).strides == (1,)
    # empty_like too, for a row-major source (a Fortran one keeps its order).
    like = devmm.empty_like(np.zeros((2, 3), dtype=np.float32))
    assert like.layout.policy == devmm.DeviceOptimal() and like.strides == (16, 1)
    assert devmm.empty_like(t).strides == (16, 1)


def test_reprs_show_one_dimensional_and_scalar_shapes_as_tuples() -> None:
    assert repr(devmm.empty(4, "uint8")).startswith("Tensor(shape=(4,), dtype=uint8,")
    assert repr(devmm.empty((), "uint8")).startswith("Tensor(shape=(), dtype=uint8,")


def test_signatures_match_the_seed() -> None:
    import inspect

    assert str(inspect.signature(devmm.Tensor)) == "(buffer, dtype, shape, layout, offset=0, read_only=False)"
    assert list(inspect.signature(devmm.empty_like).parameters)[0] == "obj"
    assert devmm.empty_like(obj=np.zeros(3, dtype=np.int8)).shape == (3,)


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


def test_empty_like_reads_shape_and_dtype_as_attributes() -> None:
    # An object without `shape`, `dtype` or `__dlpack_device__` is the wrong
    # type of argument: a TypeError saying what is accepted (issue 33).
    with pytest.raises(TypeError, match=r"empty_like\(obj\): list has no shape; pass a devmm Tensor or an array"):
        devmm.empty_like([1, 2, 3])

    class NoDType:
        shape = (2,)

        def __dlpack_device__(self) -> tuple[int, int]:
            return (1, 0)

    with pytest.raises(TypeError, match=r"empty_like\(obj\): NoDType has no dtype"):
        devmm.empty_like(NoDType())
    assert devmm.empty_like(NoDType(), dtype="int8").shape == (2,)


class _ArrayApiDType:
    """A dtype as array-api-strict has them: no kind, no itemsize, only a name."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __str__(self) -> str:
        return self.name


class _ArrayApiArray:
    def __init__(self, dtype: str) -> None:
        self.shape = (2, 2)
        self.dtype = _ArrayApiDType(dtype)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


def test_empty_like_reads_the_device_only_when_none_is_given(cpu: devmm.Device) -> None:
    class NoDevice:
        shape = (3,)
        dtype = np.dtype("int8")

    assert devmm.empty_like(NoDevice(), device=cpu).shape == (3,)
    with pytest.raises(TypeError, match="no __dlpack_device__"):
        devmm.empty_like(NoDevice())


def test_empty_like_reads_array_api_dtypes_by_their_printed_name() -> None:
    for printed in ("array_api_strict.float32", "float32"):
        t = devmm.empty_like(_ArrayApiArray(printed))
        assert (t.shape, t.dtype) == ((2, 2), devmm.DType.from_string("float32"))
    with pytest.raises(TypeError, match="as a dtype"):
        devmm.empty_like(_ArrayApiArray("array_api_strict.quaternion"))


def test_empty_argument_errors() -> None:
    with pytest.raises(ValueError, match="float8"):
        devmm.empty((2,), "float8")
    with pytest.raises(ValueError, match="overflows"):
        devmm.empty((1 << 40, 1 << 40), "float64")
    with pytest.raises(MemoryError):
        devmm.empty((1 << 60,), "uint8")
    with pytest.raises(ValueError, match="mr lives on cpu:0"):
        devmm.empty((2,), "uint8", device="cuda:0", mr=devmm.get_current_memory_resource())
    with pytest.raises(TypeError):
        devmm.empty((2,), "uint8", layout="row")  # type: ignore[arg-type]


class _Three:
    """An integer by `__index__` only, as NumPy scalars and others are."""

    def __index__(self) -> int:
        return 3


def test_shapes_read_alike_from_tuples_sequences_and_index_objects() -> None:
    # Tuples take a fast path; every other spelling must give the same shape.
    for shape in ((2, 3), [2, 3], (2, _Three()), (np.int64(2), np.uint8(3)), range(2, 4)):
        assert devmm.empty(shape, "float32").shape == (2, 3)  # type: ignore[arg-type]
    assert devmm.empty(4, "float32").shape == devmm.empty((4,), "float32").shape == (4,)
    assert devmm.empty((), "float32").shape == ()


def test_shape_errors_are_the_same_through_the_tuple_fast_path() -> None:
    limit = (1 << 64) - 1
    for bad, shown in ((-1, "-1"), (1 << 70, str(1 << 70))):
        for shape in ((2, bad), [2, bad]):
            with pytest.raises(ValueError, match=rf"^shape extents must be non-negative ints from 0 to {limit}, not {shown}$"):
                devmm.empty(shape, "uint8")
    # An extent that is no integer is a ValueError too, as the seed's shape
    # check raises it.
    for shape, shown in (((2, 1.5), "1.5"), ([2, 1.5], "1.5"), ((2, "3"), "'3'")):
        with pytest.raises(ValueError, match=rf"^shape extents must be non-negative ints from 0 to {limit}, not {shown}$"):
            devmm.empty(shape, "uint8")  # type: ignore[arg-type]


def test_dtype_names_read_alike_call_after_call() -> None:
    # Names are remembered by string object; more names than the memory
    # holds, in turn, and str subclasses must each still read as themselves.
    class Name(str):
        pass

    names = ["float32", "int8", "uint16", "float64", "bool", "complex64", "bfloat16"]
    for _ in range(3):
        for name in names + [Name("int64")]:
            assert devmm.empty((1,), name).dtype == devmm.DType.from_string(str(name))
    with pytest.raises(ValueError, match="float8"):
        devmm.empty((1,), "float8")
    with pytest.raises(ValueError, match="float8"):
        devmm.empty((1,), "float8")


def test_tensors_and_buffers_made_after_others_were_dropped_are_gc_tracked() -> None:
    # A recycled object (PyO3's class freelists reuse them) must still be
    # tracked, or a cycle through a Python resource would never be collected.
    for _ in range(100):
        devmm.empty((2,), "int8").buffer.free()
    t = devmm.empty((2,), "int8")
    assert gc.is_tracked(t) and gc.is_tracked(t.buffer)


def test_zero_size_tensors() -> None:
    t = devmm.empty((0, 4), "float32")
    assert t.shape == (0, 4) and t.data_ptr == 0


def test_tensor_offset_is_in_elements_beside_byte_offset() -> None:
    from devmm.testing import RecordingMemoryResource

    # The recording resource promises 256-byte pointers and hands out 256
    # first; a 512-byte base makes empty over-allocate and start the tensor
    # 256 bytes (64 float32 elements) into the buffer.
    recording = RecordingMemoryResource(guaranteed_alignment=256)
    t = devmm.empty((4,), "float32", layout=devmm.Aligned(devmm.RowMajor(), 1, 512), mr=recording)
    assert (t.buffer.ptr, t.byte_offset, t.offset, t.data_ptr) == (256, 256, 64, 512)
    assert devmm.empty((4,), "float64", layout=devmm.RowMajor()).offset == 0


def test_tensor_public_constructor_views_a_buffer(stream: devmm.Stream) -> None:
    buf = devmm.DeviceBuffer(64, stream=stream)
    layout = devmm.Layout((2, 3), (3, 1), "float32")
    t = devmm.Tensor(buf, "float32", (2, 3), layout, offset=2)
    assert (t.shape, t.strides, t.offset, t.byte_offset) == ((2, 3), (3, 1), 2, 8)
    assert t.data_ptr == buf.ptr + 8 and t.buffer is buf and not t.read_only
    assert t.layout.policy is None
    assert np.from_dlpack(t).shape == (2, 3)
    ro = devmm.Tensor(buf, devmm.DType.from_string("float32"), (2, 3), layout, read_only=True)
    assert ro.read_only and ro.offset == 0


@pytest.mark.parametrize("offset", [1.5, "1", None, -1])
def test_tensor_offset_is_an_element_count(stream: devmm.Stream, offset: object) -> None:
    # The seed's rule: anything but a non-negative int is a ValueError.
    buf = devmm.DeviceBuffer(64, stream=stream)
    layout = devmm.Layout((2, 3), (3, 1), "float32")
    with pytest.raises(ValueError, match="offset"):
        devmm.Tensor(buf, "float32", (2, 3), layout, offset=offset)  # type: ignore[arg-type]


def test_tensors_buffers_and_streams_take_weak_references(stream: devmm.Stream) -> None:
    # As the seed's plain classes do: what a caller watches to see a
    # tensor (and its memory) go.
    import weakref

    from devmm._core.stream import CpuStream

    t = devmm.empty((2, 2), "float32")
    refs = [weakref.ref(t), weakref.ref(t.buffer), weakref.ref(devmm.DeviceBuffer(8))]
    watched = CpuStream()
    refs.append(weakref.ref(watched))
    assert refs[0]() is t and refs[3]() is watched
    del t, watched
    gc.collect()
    assert [r() for r in refs] == [None] * 4
    # The CPU's one native stream is one object, for the process's life.
    kept = weakref.ref(devmm.runtime_for("cpu").default_stream("cpu"))
    gc.collect()
    assert kept() is devmm.runtime_for("cpu").create_stream("cpu")


def test_tensor_constructor_refusals(stream: devmm.Stream) -> None:
    buf = devmm.DeviceBuffer(24, stream=stream)
    layout = devmm.Layout((2, 3), (3, 1), "float32")
    with pytest.raises(ValueError, match="needs 24 bytes from offset 4"):
        devmm.Tensor(buf, "float32", (2, 3), layout, offset=1)
    # An offset whose bytes overflow says what it must be.
    with pytest.raises(ValueError, match=r"offset must be an element count from 0 to 6 \(the 24-byte buffer holds 6 float32\)"):
        devmm.Tensor(buf, "float32", (2, 3), layout, offset=1 << 62)
    with pytest.raises(ValueError, match=r"for shape \[2, 3\], not \[3, 2\]"):
        devmm.Tensor(buf, "float32", (3, 2), layout)
    with pytest.raises(ValueError, match="4-byte elements, not 8-byte"):
        devmm.Tensor(buf, "float64", (2, 3), layout)
    with pytest.raises(TypeError):
        devmm.Tensor(b"not a buffer", "float32", (2, 3), layout)  # type: ignore[arg-type]


def test_empty_accepts_a_resolved_layout(cpu: devmm.Device) -> None:
    layout = devmm.ColMajor()((2, 3), "float32", cpu)
    t = devmm.empty((2, 3), "float32", layout=layout)
    assert t.strides == (1, 2) and t.layout == layout
    assert t.layout.policy is layout.policy
    hand = devmm.Layout((2, 3), (4, 1), "float32")
    h = devmm.empty((2, 3), "float32", layout=hand)
    assert h.strides == (4, 1) and h.buffer.nbytes == hand.required_nbytes and h.layout.policy is None
    with pytest.raises(ValueError, match=r"for shape \[2, 3\], not \[3, 2\]"):
        devmm.empty((3, 2), "float32", layout=layout)
    with pytest.raises(ValueError, match="not 8-byte"):
        devmm.empty((2, 3), "float64", layout=layout)
    with pytest.raises(TypeError, match="LayoutPolicy or a resolved devmm.Layout"):
        devmm.empty((2, 3), "float32", layout="row-major")  # type: ignore[arg-type]


def test_empty_like_overrides_dtype_layout_and_device() -> None:
    src = np.zeros((2, 3), dtype=np.float64)
    t = devmm.empty_like(src, dtype="int16")
    assert (t.shape, t.dtype) == ((2, 3), devmm.DType.from_string("int16"))
    c = devmm.empty_like(src, layout=devmm.ColMajor())
    assert c.strides == (1, 2) and c.dtype == devmm.DType.from_string("float64")
    r = devmm.empty_like(t, layout=devmm.RowMajor()((2, 3), "int16", "cpu"))
    assert r.strides == (3, 1)
    d = devmm.empty_like(src, device=devmm.Device.from_string("cpu"), dtype=np.float32)
    assert d.device == devmm.Device.from_string("cpu") and d.dtype == devmm.DType.from_string("float32")


def test_tensor_free_frees_the_buffer(stats: devmm.StatisticsAdaptor, stream: devmm.Stream) -> None:
    t = devmm.empty((2, 3), "float32", layout=devmm.RowMajor(), mr=stats)
    assert stats.current_bytes == 24
    t.free()
    assert stats.current_bytes == 0 and stats.deallocations == 1
    # The buffer object, made after the free, reports it.
    assert t.buffer.closed
    with pytest.raises(BufferError, match="was freed"):
        t.__dlpack__()


def test_tensor_free_is_idempotent_like_the_buffers(stats: devmm.StatisticsAdaptor, stream: devmm.Stream) -> None:
    t = devmm.empty((4,), "int32", mr=stats)
    buffer = t.buffer
    t.free()
    t.free(stream)
    buffer.free()
    t.free()
    assert buffer.closed and stats.deallocations == 1 and stats.current_bytes == 0


def test_tensor_free_frees_a_view_s_shared_buffer(stats: devmm.StatisticsAdaptor) -> None:
    base = devmm.DeviceBuffer(64, mr=stats)
    layout = devmm.RowMajor()((2, 3), devmm.DType.from_string("float32"), devmm.Device.from_string("cpu"))
    view = devmm.Tensor(base, "float32", (2, 3), layout, offset=2)
    view.free()
    assert base.closed and stats.current_bytes == 0


@pytest.mark.parametrize("bad", [5, -1, "x", object(), devmm.Device.from_string("cpu")])
def test_tensor_free_refuses_streams_as_the_buffer_does(bad: object) -> None:
    t = devmm.empty((2,), "uint8")
    with pytest.raises(Exception) as from_buffer:
        t.buffer.free(bad)  # type: ignore[arg-type]
    with pytest.raises(type(from_buffer.value)) as from_tensor:
        t.free(bad)  # type: ignore[arg-type]
    assert str(from_tensor.value) == str(from_buffer.value)
    assert not t.buffer.closed
    t.free()
    assert t.buffer.closed
