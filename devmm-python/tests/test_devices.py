"""Device, DeviceType and DType."""

import pytest

import devmm


def test_device_is_a_frozen_hashable_value() -> None:
    a = devmm.Device.from_string("cuda:1")
    b = devmm.Device(devmm.DeviceType.CUDA, 1)
    assert a == b and hash(a) == hash(b)
    assert {a: "x"}[b] == "x"
    assert a != devmm.Device.from_string("cuda:0")
    with pytest.raises(AttributeError):
        a.index = 3  # type: ignore[misc]


def test_device_repr_str_and_parts() -> None:
    d = devmm.Device.from_string("rocm:2")
    assert repr(d) == "Device(type=<DeviceType.ROCM: 10>, index=2)"
    assert str(d) == "rocm:2"
    assert d.type is devmm.DeviceType.ROCM
    assert d.index == 2
    assert d.__dlpack_device__() == (10, 2)


@pytest.mark.parametrize("spec", ["cpu", "cuda_host:0", "cuda_managed:3"])
def test_device_constructor_accepts_type_name_and_code(spec: str) -> None:
    d = devmm.Device.from_string(spec)
    assert devmm.Device(d.type, d.index) == d
    assert devmm.Device(int(d.type), d.index) == d
    assert devmm.Device(d.type.name.lower(), d.index) == d


@pytest.mark.parametrize("bad", ["", "gpu", "cuda:", "cuda:-1", "CUDA:0", "cuda:1:2"])
def test_malformed_device_strings_raise_value_error(bad: str) -> None:
    with pytest.raises(ValueError, match="TYPE:ORDINAL"):
        devmm.Device.from_string(bad)


def test_device_type_values_are_the_dlpack_codes() -> None:
    codes = {t.name: int(t) for t in (
        devmm.DeviceType.CPU,
        devmm.DeviceType.CUDA,
        devmm.DeviceType.CUDA_HOST,
        devmm.DeviceType.ROCM,
        devmm.DeviceType.ROCM_HOST,
        devmm.DeviceType.CUDA_MANAGED,
    )}
    assert codes == {"CPU": 1, "CUDA": 2, "CUDA_HOST": 3, "ROCM": 10, "ROCM_HOST": 11, "CUDA_MANAGED": 13}
    assert devmm.DeviceType(10) is devmm.DeviceType.ROCM
    assert devmm.DeviceType.CUDA == 2
    assert devmm.DeviceType.CUDA.value == 2
    assert [0, 1, 2][devmm.DeviceType.CUDA] == 2  # __index__
    assert repr(devmm.DeviceType.CUDA_HOST) == "<DeviceType.CUDA_HOST: 3>"
    with pytest.raises(ValueError, match="not a valid DeviceType"):
        devmm.DeviceType(4)


def test_dtype_parsing_equality_and_fields() -> None:
    f32 = devmm.DType.from_string("float32")
    assert f32 == devmm.DType.from_string("float32")
    assert f32 != devmm.DType.from_string("int32")
    assert hash(f32) == hash(devmm.DType.from_string("float32"))
    assert (f32.code, f32.bits, f32.lanes, f32.itemsize, f32.name) == (2, 32, 1, 4, "float32")
    assert repr(devmm.DType.from_string("bfloat16")) == "DType('bfloat16')"
    assert devmm.DType.from_string("complex128").itemsize == 16


def test_unknown_dtype_lists_the_accepted_names() -> None:
    with pytest.raises(ValueError, match="bfloat16"):
        devmm.DType.from_string("float8")


def test_assigning_a_device_field_raises_frozen_instance_error() -> None:
    import dataclasses

    d = devmm.Device(devmm.DeviceType.CUDA, 1)
    with pytest.raises(dataclasses.FrozenInstanceError, match="'index'"):
        d.index = 3  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError, match="'type'"):
        del d.type  # type: ignore[misc]
    assert d == devmm.Device.from_string("cuda:1")


@pytest.mark.parametrize("index", [-1, -(2**40), 2**31, 2**64])
def test_device_index_out_of_range_is_a_value_error(index: int) -> None:
    with pytest.raises(ValueError, match="ordinal"):
        devmm.Device(devmm.DeviceType.CUDA, index)


def test_device_index_defaults_to_zero_and_accepts_the_maximum() -> None:
    assert devmm.Device(devmm.DeviceType.CPU).index == 0
    assert devmm.Device(devmm.DeviceType.CUDA, 2**31 - 1).index == 2**31 - 1


def test_dtype_constructs_any_dlpack_type() -> None:
    f32 = devmm.DType(2, 32)
    assert f32 == devmm.DType.from_string("float32") and f32.lanes == 1
    vec = devmm.DType(2, 32, 4)
    assert (vec.code, vec.bits, vec.lanes, vec.itemsize) == (2, 32, 4, 16)
    # DLPack 1.1 low-precision floats: float8 (codes 7-14), float6, float4.
    e4m3fn = devmm.DType(10, 8)
    assert (e4m3fn.name, e4m3fn.itemsize) == ("float8_e4m3fn", 1)
    assert devmm.DType.from_string("float8_e5m2") == devmm.DType(12, 8)
    fp6 = devmm.DType(15, 6)
    assert (fp6.name, fp6.itemsize) == ("float6_e2m3fn", 1)
    fp4 = devmm.DType(17, 4)
    assert (fp4.name, fp4.itemsize, fp4.code, fp4.bits) == ("float4_e2m1fn", 1, 17, 4)
    assert devmm.DType(17, 4, 2).itemsize == 1


@pytest.mark.parametrize(
    ("args", "named"),
    [((18, 8), "code"), ((-1, 8), "code"), ((2, 0), "bits"), ((2, 256), "bits"), ((2, -8), "bits"),
     ((2, 8, 0), "lanes"), ((2, 8, 2**16), "lanes")],
)
def test_dtype_out_of_range_fields_are_value_errors(args: tuple[int, ...], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        devmm.DType(*args)


def test_packed_sub_byte_dtypes_cannot_be_laid_out() -> None:
    with pytest.raises(ValueError, match="packs 4 bits per element"):
        devmm.empty((8,), devmm.DType(17, 4), layout=devmm.RowMajor())
    # Lanes that fill whole bytes can.
    assert devmm.empty((8,), devmm.DType(17, 4, 2), layout=devmm.RowMajor()).buffer.nbytes == 8


def test_dtype_from_any_reads_every_spelling() -> None:
    import numpy as np

    f32 = devmm.DType.from_string("float32")
    i64 = devmm.DType.from_string("int64")
    for spelling in (f32, "float32", np.float32, np.dtype("float32"), "f4", "<f4", "=f4"):
        assert devmm.DType.from_any(spelling) == f32, spelling
    for spelling in (np.int64, "i8", "<i8", np.dtype("<i8")):
        assert devmm.DType.from_any(spelling) == i64, spelling
    assert devmm.DType.from_any(np.bool_) == devmm.DType.from_string("bool")
    assert devmm.DType.from_any(np.complex64) == devmm.DType.from_string("complex64")
    assert devmm.DType.from_any("u1") == devmm.DType.from_string("uint8")


def test_dtype_from_any_reads_ml_dtypes() -> None:
    import ml_dtypes
    import numpy as np

    assert devmm.DType.from_any(ml_dtypes.bfloat16) == devmm.DType.from_string("bfloat16")
    assert devmm.DType.from_any(np.dtype(ml_dtypes.float8_e4m3fn)) == devmm.DType(10, 8)
    assert devmm.DType.from_any(ml_dtypes.float8_e5m2) == devmm.DType(12, 8)
    assert devmm.DType.from_any(ml_dtypes.float8_e4m3b11fnuz) == devmm.DType(9, 8)
    t = devmm.empty((2, 3), ml_dtypes.bfloat16, layout=devmm.RowMajor())
    assert (t.dtype.name, t.buffer.nbytes) == ("bfloat16", 12)


def test_dtype_from_any_reads_torch_dtypes_by_their_torch_spelling() -> None:
    # torch is too heavy for the test environment; a torch.dtype is
    # recognised by its type (torch.dtype) and spelled "torch.<name>", which
    # is all the conversion reads, so a stand-in of that type exercises it.
    TorchDType = type("dtype", (), {"__module__": "torch", "__str__": lambda self: self.text})
    for text, expected in (("torch.float32", "float32"), ("torch.bfloat16", "bfloat16"),
                           ("torch.bool", "bool"), ("torch.float8_e4m3fn", "float8_e4m3fn")):
        fake = TorchDType()
        fake.text = text  # type: ignore[attr-defined]
        assert devmm.DType.from_any(fake) == devmm.DType.from_string(expected)


def test_dtype_from_any_refusals() -> None:
    import numpy as np

    with pytest.raises(ValueError, match="big-endian"):
        devmm.DType.from_any(">i8")
    with pytest.raises(ValueError, match="no DLPack type code"):
        devmm.DType.from_any(np.dtype("datetime64[s]"))
    with pytest.raises(ValueError, match="float32"):
        devmm.DType.from_any("not-a-dtype")
    with pytest.raises(TypeError, match="cannot interpret 3.5 as a dtype"):
        devmm.DType.from_any(3.5)


def test_empty_empty_like_and_layouts_accept_every_dtype_spelling() -> None:
    import numpy as np

    for spelling in ("float32", np.float32, np.dtype("float32"), "f4", devmm.DType(2, 32)):
        assert devmm.empty((2,), spelling).dtype == devmm.DType(2, 32)
        assert devmm.empty_like(np.zeros(2), dtype=spelling).dtype == devmm.DType(2, 32)
        assert devmm.RowMajor()((2,), spelling, "cpu").itemsize == 4
        assert devmm.Layout((2,), (1,), spelling).itemsize == 4


def test_stream_sentinels_pickle_and_copy_to_themselves() -> None:
    import copy
    import pickle

    for sentinel in (devmm.DEFAULT, devmm.LEGACY_DEFAULT, devmm.PER_THREAD_DEFAULT):
        for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
            assert pickle.loads(pickle.dumps(sentinel, protocol)) is sentinel
        assert copy.copy(sentinel) is sentinel
        assert copy.deepcopy(sentinel) is sentinel
        assert copy.deepcopy([sentinel])[0] is sentinel


def test_device_type_is_an_int_enum() -> None:
    import enum
    import pickle

    T = devmm.DeviceType
    assert issubclass(T, enum.IntEnum) and issubclass(T, int)
    assert [m.name for m in T] == ["CPU", "CUDA", "CUDA_HOST", "ROCM", "ROCM_HOST", "CUDA_MANAGED"]
    assert [int(m) for m in T] == [1, 2, 3, 10, 11, 13]
    assert T(2) is T.CUDA and T["ROCM"] is T.ROCM
    assert isinstance(T.CPU, int) and T.CUDA + 0 == 2
    assert pickle.loads(pickle.dumps(T.ROCM_HOST)) is T.ROCM_HOST
    assert (T.__module__, T.__name__) == ("devmm", "DeviceType")
    # Everything that hands out a device type hands out the members.
    assert devmm.Device.from_string("cuda_managed:0").type is T.CUDA_MANAGED
    assert devmm.runtime_for("cpu").device_types == frozenset({T.CPU})
    assert devmm.Device(T.ROCM) == devmm.Device(10) == devmm.Device("rocm")
