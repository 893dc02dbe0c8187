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
