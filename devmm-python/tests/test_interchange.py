"""Interchange both ways on the host: DLPack import, buffer exports, the
buffer protocol, NumPy's array interface, empty_like's memory order, rmm's
buffer and stream surface, and pickling."""

import ctypes
import gc
import pickle
import threading

import numpy as np
import pytest

import devmm
from devmm.mrs.cpu import MallocMemoryResource


class LegacyProducer:
    """A pre-1.0 producer: its __dlpack__ takes no max_version."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array
        self.calls: list[dict[str, object]] = []

    def __dlpack__(self, stream: object = None) -> object:
        self.calls.append({"stream": stream})
        return self.array.__dlpack__(stream=stream)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


def simple_buffer(obj: object, writable: bool = False) -> None:
    """Asks for a PyBUF_SIMPLE buffer (PyBUF_WRITABLE if `writable`)
    through the C API, and releases it."""
    view = ctypes.create_string_buffer(256)  # larger than any Py_buffer
    get = ctypes.pythonapi.PyObject_GetBuffer
    get.argtypes = [ctypes.py_object, ctypes.c_void_p, ctypes.c_int]
    get(obj, ctypes.addressof(view), 1 if writable else 0)
    release = ctypes.pythonapi.PyBuffer_Release
    release.argtypes = [ctypes.c_void_p]
    release(ctypes.addressof(view))


def test_from_dlpack_imports_numpy_zero_copy_and_releases_once() -> None:
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    gc.collect()  # earlier tests' imports released before the baseline
    before = devmm.foreign_memory()
    t = devmm.from_dlpack(a)
    assert (t.shape, t.strides, t.dtype.name, t.device) == ((3, 4), (4, 1), "float32", devmm.Device("cpu"))
    assert t.data_ptr == a.ctypes.data
    during = devmm.foreign_memory()
    assert during["live_count"] == before["live_count"] + 1
    assert during["live_bytes"] == before["live_bytes"] + 48
    assert repr(t.buffer.mr) == "ForeignMemoryResource(device=cpu:0, owner=DLPack import (versioned))"
    back = np.from_dlpack(t)
    assert back.ctypes.data == a.ctypes.data and (back == a).all()
    del t, back
    gc.collect()
    assert devmm.foreign_memory()["live_count"] == before["live_count"]


def test_an_imports_resource_object_is_made_once_and_shared_with_its_views() -> None:
    # An import makes its resource object only when asked (issue 34): it
    # is still one object, the same through the tensor's buffer, a
    # read-only view of it, and that view's buffer.
    t = devmm.from_dlpack(np.zeros(4, np.float32))
    ro = t.to_read_only()
    assert ro.buffer.mr is t.buffer.mr is t.buffer.mr
    assert ro.buffer.mr.device == devmm.Device("cpu")
    fresh = devmm.from_dlpack(np.zeros(4, np.float32)).to_read_only()
    assert fresh.buffer.mr is fresh.buffer.mr


def test_from_dlpack_refuses_a_view_whose_elements_overlap() -> None:
    # A 3-D view of 8 elements over 7 addresses: (0, 0, 1) and (1, 1, 0) are
    # the same float, which a devmm tensor may not describe.
    from numpy.lib.stride_tricks import as_strided

    view = as_strided(np.zeros(16, np.float32), (2, 2, 2), (4, 8, 12))
    with pytest.raises(ValueError, match="stride 3 of dimension 2 overlaps the 4 elements"):
        devmm.from_dlpack(view)


def test_from_dlpack_keeps_strides_offsets_and_the_read_only_flag() -> None:
    base = np.arange(24, dtype=np.int64).reshape(4, 6)
    view = base[1:, ::2].T  # offset, non-unit strides, transposed
    t = devmm.Tensor.from_dlpack(view)
    assert t.shape == view.shape
    assert tuple(s * 8 for s in t.strides) == view.strides
    assert t.data_ptr == view.ctypes.data
    assert (np.from_dlpack(t) == view).all()
    frozen = np.arange(3, dtype=np.uint8)
    frozen.flags.writeable = False
    ro = devmm.from_dlpack(frozen)
    assert ro.read_only


def test_from_dlpack_takes_capsules_once_and_legacy_producers() -> None:
    a = np.arange(4, dtype=np.int32)
    capsule = a.__dlpack__(max_version=(1, 0))
    t = devmm.from_dlpack(capsule)
    assert np.from_dlpack(t).tolist() == [0, 1, 2, 3]
    with pytest.raises(BufferError, match="imported once"):
        devmm.from_dlpack(capsule)
    legacy = devmm.from_dlpack(a.__dlpack__())  # a legacy capsule
    assert legacy.shape == (4,)
    producer = LegacyProducer(a)
    imported = devmm.from_dlpack(producer)
    assert imported.data_ptr == a.ctypes.data
    assert producer.calls == [{"stream": None}], "retried without max_version"
    with pytest.raises(ValueError, match="stream"):
        devmm.from_dlpack(a.__dlpack__(), stream=devmm.DEFAULT)


def test_from_dlpack_refuses_what_devmm_cannot_hold() -> None:
    with pytest.raises(TypeError, match="not a DLPack producer"):
        devmm.from_dlpack([1, 2, 3])
    gc.collect()
    before = devmm.foreign_memory()["live_count"]
    broadcast = np.broadcast_to(np.arange(3, dtype=np.int8), (2, 3))
    with pytest.raises(BufferError, match="not positive"):
        devmm.from_dlpack(broadcast)
    assert devmm.foreign_memory()["live_count"] == before, "the refused import was released"


def test_imports_outlive_the_producer_and_a_devmm_round_trip_defers_free() -> None:
    t = devmm.empty((5,), "uint8")
    again = devmm.from_dlpack(t)
    assert again.data_ptr == t.data_ptr and t.buffer.live_exports == 1
    t.buffer.free()
    assert t.buffer.closed and t.buffer.live_exports == 1
    done: list[int] = []
    worker = threading.Thread(target=lambda: done.append(again.data_ptr))
    worker.start()
    worker.join()
    assert done == [t.data_ptr], "the import is usable from another thread after the owner's free"
    del again
    gc.collect()
    assert t.buffer.live_exports == 0


def test_device_buffer_exports_bytes_through_dlpack_and_the_buffer_protocol() -> None:
    buf = devmm.DeviceBuffer.to_device(b"devmm")
    a = np.from_dlpack(buf)
    assert a.dtype == np.uint8 and a.shape == (5,) and a.ctypes.data == buf.ptr
    assert buf.__dlpack_device__() == (1, 0)
    assert bytes(buf) == b"devmm"
    view = memoryview(buf)
    assert (view.format, view.nbytes, view.readonly) == ("B", 5, False)
    view[0] = ord("D")
    buf.free()
    assert buf.closed and buf.live_exports == 2, "the view and the NumPy array hold it"
    assert bytes(view) == b"Devmm"
    view.release()
    del a
    gc.collect()
    assert buf.live_exports == 0
    with pytest.raises(BufferError):
        memoryview(buf)


def test_tensors_expose_the_buffer_protocol_and_the_array_interface() -> None:
    t = devmm.empty((2, 3), "float64", layout=devmm.ColMajor())
    ai = t.__array_interface__
    assert ai == {"shape": (2, 3), "typestr": "<f8", "data": (t.data_ptr, False), "strides": (8, 16), "version": 3}
    a = np.asarray(t)
    assert a.dtype == np.float64 and a.strides == (8, 16) and a.ctypes.data == t.data_ptr
    a[:] = [[1, 2, 3], [4, 5, 6]]
    assert np.asarray(t).tolist() == [[1, 2, 3], [4, 5, 6]], "a zero-copy view"
    view = memoryview(t)
    assert (view.format, view.shape, view.strides) == ("d", (2, 3), (8, 16))
    view.release()
    assert bytes(t) == np.asarray(t).tobytes(order="C"), "bytes() reads a strided view in C order"
    with pytest.raises(BufferError, match="C-contiguous"):
        simple_buffer(t)  # PyBUF_SIMPLE promises contiguous bytes
    row = devmm.empty((4,), "int16")
    simple_buffer(row)
    np.asarray(row)[:] = [1, 2, 3, 4]
    assert bytes(row) == np.array([1, 2, 3, 4], dtype=np.int16).tobytes()
    ro = row.to_read_only()
    assert ro.__array_interface__["data"] == (row.data_ptr, True)
    assert not np.asarray(ro).flags.writeable
    with pytest.raises(AttributeError, match="__cuda_array_interface__"):
        row.__cuda_array_interface__
    assert not hasattr(devmm.DeviceBuffer(4), "__cuda_array_interface__")
    with pytest.raises(AttributeError, match="bfloat16"):
        devmm.empty((2,), "bfloat16").__array_interface__


def test_zero_size_exports_are_empty() -> None:
    buf = devmm.DeviceBuffer(0)
    assert bytes(buf) == b""
    assert np.asarray(devmm.empty((0, 3), "int32")).shape == (0, 3)


def test_empty_like_keeps_the_memory_order_unless_a_layout_is_given() -> None:
    fortran = np.asfortranarray(np.zeros((2, 3), dtype=np.int32))
    like = devmm.empty_like(fortran)
    assert like.strides == (1, 2) and like.layout.policy.permutation == (1, 0)
    assert devmm.empty_like(like).strides == (1, 2)
    assert devmm.empty_like(fortran, layout=devmm.RowMajor()).strides == (3, 1)
    assert devmm.empty_like(np.zeros((2, 3))).layout.policy == devmm.DeviceOptimal()
    nhwc = devmm.empty((1, 3, 4, 5), "uint8", layout=devmm.Permuted((0, 2, 3, 1)))
    assert devmm.empty_like(nhwc).strides == nhwc.strides


def test_rmm_buffer_surface() -> None:
    db = devmm.DeviceBuffer.to_device(b"abc")
    out = db.copy_to_host()
    assert isinstance(out, np.ndarray) and out.dtype == np.uint8 and out.tolist() == [97, 98, 99]
    target = bytearray(5)
    assert db.copy_to_host(target) is target and target == b"abc\0\0"
    assert db.copy_to_host(offset=1).tolist() == [98, 99]
    with pytest.raises(ValueError, match="writable"):
        db.copy_to_host(b"xyz")
    with pytest.raises(ValueError, match="at least 3 bytes"):
        db.copy_to_host(bytearray(2))
    db.copy_from_host(b"Z", offset=2)
    assert bytes(db) == b"abZ"
    with pytest.raises(ValueError, match="offset 3"):
        db.copy_from_host(b"Z", offset=3)

    dst = devmm.DeviceBuffer(size=5)
    devmm.copy_host_to_ptr(b"\0" * 5, dst.ptr)
    devmm.copy_device_to_ptr(db.ptr, dst.ptr, db.size)
    assert dst.copy_to_host().tolist() == [97, 98, 90, 0, 0]
    hb = bytearray(db.nbytes)
    devmm.copy_ptr_to_host(db.ptr, hb)
    assert hb == bytearray(b"abZ")
    with pytest.raises(ValueError, match="writable"):
        devmm.copy_ptr_to_host(db.ptr, b"abc")
    via_mr = devmm.DeviceBuffer.to_device(np.array([1, 2], dtype=np.int16), mr=MallocMemoryResource())
    assert bytes(via_mr) == np.array([1, 2], dtype=np.int16).tobytes()


def test_rmm_stream_surface_on_the_cpu() -> None:
    cpu = devmm.Device("cpu")
    assert devmm.runtime_for(cpu).default_stream(cpu).is_default()
    assert devmm.StreamFlags.SYNC_DEFAULT == 0 and devmm.StreamFlags.NON_BLOCKING == 1
    pool = devmm.StreamPool(pool_size=3, flags=devmm.StreamFlags.NON_BLOCKING)
    assert pool.get_pool_size() == 3
    got: list[devmm.Stream] = []
    threads = [threading.Thread(target=lambda: got.append(pool.get_stream())) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(got) == 8 and all(s.device == cpu for s in got)
    assert pool.get_stream(2).device == cpu
    with pytest.raises(ValueError, match="out of range"):
        pool.get_stream(3)
    with pytest.raises(ValueError, match="at least one stream"):
        devmm.StreamPool(pool_size=0)
    assert devmm.StreamPool().get_pool_size() == 16


@pytest.mark.parametrize(
    "value",
    [
        devmm.Device("cuda", 1),
        devmm.Device.from_string("cpu"),
        devmm.DeviceType.ROCM,
        devmm.DType.from_string("bfloat16"),
        devmm.DType.from_string("complex64"),
        devmm.RowMajor(),
        devmm.ColMajor(),
        devmm.DeviceOptimal(),
        devmm.DEFAULT,
        devmm.LEGACY_DEFAULT,
        devmm.PER_THREAD_DEFAULT,
        devmm.StreamFlags.NON_BLOCKING,
    ],
)
def test_values_pickle_to_equal_values(value: object) -> None:
    assert pickle.loads(pickle.dumps(value)) == value


def test_parameterised_policies_pickle_to_the_same_layouts() -> None:
    cpu = devmm.Device("cpu")
    for policy in [devmm.Permuted((1, 0)), devmm.Aligned(devmm.ColMajor(), 64, 128)]:
        copy = pickle.loads(pickle.dumps(policy))
        assert type(copy) is type(policy) and repr(copy) == repr(policy)
        assert copy((3, 5), "float32", cpu).strides == policy((3, 5), "float32", cpu).strides


def test_resolved_layouts_pickle_with_their_policy() -> None:
    cpu = devmm.Device("cpu")
    padded = devmm.Aligned(devmm.RowMajor(), 64, 128)((3, 5), "float32", cpu)
    copy = pickle.loads(pickle.dumps(padded))
    assert copy == padded
    assert (copy.strides, copy.required_nbytes, copy.base_alignment) == ((16, 1), 256, 128)
    assert repr(copy.policy) == repr(padded.policy)


def test_memory_refuses_to_pickle() -> None:
    for obj, name in [(devmm.empty((2,), "int8"), "Tensor"), (devmm.DeviceBuffer(4), "DeviceBuffer")]:
        with pytest.raises(TypeError, match=f"cannot pickle a devmm {name}: device memory is not serialisable"):
            pickle.dumps(obj)


def test_ctypes_sees_the_same_bytes() -> None:
    buf = devmm.DeviceBuffer.to_device(b"xyz")
    assert ctypes.string_at(buf.ptr, 3) == b"xyz"


def test_empty_like_refuses_what_has_no_shape_with_a_type_error() -> None:
    # `obj.shape` is read first: its absence makes `obj` the wrong type.
    with pytest.raises(TypeError, match=r"empty_like\(obj\): int has no shape"):
        devmm.empty_like(3)

    class NoShape:
        def __dlpack_device__(self) -> tuple[int, int]:
            return (1, 0)

    with pytest.raises(TypeError, match=r"empty_like\(obj\): NoShape has no shape"):
        devmm.empty_like(NoShape())


def test_raw_copies_refuse_negative_addresses_and_counts_with_a_value_error() -> None:
    db = devmm.DeviceBuffer.to_device(b"abc")
    with pytest.raises(ValueError, match="d_dst must be a non-negative integer from 0"):
        devmm.copy_device_to_ptr(db.ptr, -1, 3)
    with pytest.raises(ValueError, match="count must be a non-negative integer from 0"):
        devmm.copy_device_to_ptr(db.ptr, db.ptr, -3)
    with pytest.raises(ValueError, match="db must be a non-negative integer from 0"):
        devmm.copy_host_to_ptr(b"x", -1)
    with pytest.raises(ValueError, match="db must be a non-negative integer from 0"):
        devmm.copy_ptr_to_host(-1, bytearray(1))


def test_every_array_interface_of_freed_memory_says_it_was_freed() -> None:
    # An AttributeError would read as "no interface" to NumPy, which then
    # wraps the tensor in a 0-d object array instead of failing.
    t = devmm.empty((2, 3), "float32")
    address = t.buffer.ptr
    t.buffer.free()
    assert t.buffer.ptr == address, "the seed's ptr keeps the address"
    for read in (
        lambda: t.__array_interface__,
        lambda: t.__cuda_array_interface__,
        lambda: t.buffer.__cuda_array_interface__,
        lambda: np.asarray(t),
        lambda: np.array(t),
        lambda: memoryview(t),
        lambda: memoryview(t.buffer),
        lambda: np.from_dlpack(t),
    ):
        with pytest.raises((BufferError, ValueError), match="freed") as raised:
            read()
        assert not isinstance(raised.value, AttributeError)


@pytest.mark.parametrize("shape", [(0,), (0, 5), (5, 0), (2, 0, 3), (0, 0, 0, 1)])
def test_zero_size_arrays_import_whatever_their_strides(shape: tuple[int, ...]) -> None:
    empty = np.empty(shape, dtype=np.float64)
    for producer in (empty, np.ascontiguousarray(empty), np.asfortranarray(empty), empty[::-1]):
        t = devmm.from_dlpack(producer)
        assert (t.shape, t.dtype.name) == (shape, "float64")
        assert np.from_dlpack(t).shape == shape


def read_only_capsule(array: np.ndarray) -> object:
    """A hand-made DLPack 1.1 capsule over `array`'s bytes, flagged
    READ_ONLY, with no deleter (the capsule keeps its structs alive)."""
    from devmm._dlpack import _abi

    shape = (ctypes.c_int64 * 1)(array.nbytes)
    managed = _abi.DLManagedTensorVersioned()
    managed.version.major, managed.version.minor = 1, 1
    managed.flags = 1  # DLPACK_FLAG_BITMASK_READ_ONLY
    managed.dl_tensor.data = array.ctypes.data
    managed.dl_tensor.device.device_type, managed.dl_tensor.device.device_id = 1, 0
    managed.dl_tensor.ndim = 1
    managed.dl_tensor.dtype.code, managed.dl_tensor.dtype.bits, managed.dl_tensor.dtype.lanes = 1, 8, 1
    managed.dl_tensor.shape = shape
    new = ctypes.pythonapi.PyCapsule_New
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    capsule = new(ctypes.addressof(managed), b"dltensor_versioned", None)
    read_only_capsule.kept.append((managed, shape, array))  # type: ignore[attr-defined]
    return capsule


read_only_capsule.kept = []  # type: ignore[attr-defined]


def test_read_only_imports_refuse_every_devmm_write_path() -> None:
    frozen = np.arange(8, dtype=np.uint8)
    frozen.flags.writeable = False
    for t in (devmm.from_dlpack(frozen), devmm.from_dlpack(read_only_capsule(np.arange(8, dtype=np.uint8)))):
        assert t.read_only
        before = bytes(t)
        with pytest.raises(ValueError, match="read-only"):
            t.buffer.copy_from_host(b"\xff\xff")
        with pytest.raises(ValueError, match="read-only"):
            t.buffer.copy_from_host(b"\xff", offset=3)
        assert bytes(t) == before, "nothing was written"
        assert memoryview(t.buffer).readonly
        assert not np.from_dlpack(t.buffer).flags.writeable
        assert not np.asarray(t).flags.writeable
        for obj in (t, t.buffer):
            with pytest.raises(BufferError, match="read-only"):
                simple_buffer(obj, writable=True)
