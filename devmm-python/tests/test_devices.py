"""Device, DeviceType and DType."""

import threading
from collections.abc import Callable

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


@pytest.mark.parametrize("name", [5, None, b"float32", devmm.DType(2, 32)])
def test_a_dtype_name_that_is_no_string_is_a_value_error(name: object) -> None:
    # As the seed's lookup of an unknown name: even a DType, whose str() is a
    # name, is not one (DType.from_any reads every spelling).
    with pytest.raises(ValueError, match="DType.from_string takes a dtype name .*DType.from_any"):
        devmm.DType.from_string(name)  # type: ignore[arg-type]


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
    with pytest.raises(ValueError, match="out of range"):
        devmm.Device(devmm.DeviceType.CUDA, index)


def test_a_device_index_is_an_int_and_is_kept_as_one() -> None:
    import numpy as np

    # Anything with __index__ is read as the int it is (the seed keeps the object).
    d = devmm.Device(devmm.DeviceType.CUDA, np.int64(1))
    assert type(d.index) is int and d == devmm.Device.from_string("cuda:1") and str(d) == "cuda:1"
    # A float, even a whole one, is no ordinal (ADR 0016): the seed would keep
    # 0.0, print it as "cpu:0.0" and hand DLPack a float device id. A string
    # is a TypeError there too.
    for index in (0.0, 1.5, -1.0, "0", None):
        with pytest.raises(TypeError, match="index"):
            devmm.Device(devmm.DeviceType.CPU, index)  # type: ignore[arg-type]


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
    with pytest.raises(ValueError, match="no DLPack DLDataType encoding"):
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


def test_device_and_dtype_are_frozen_slotted_dataclasses() -> None:
    import dataclasses

    d = devmm.Device(devmm.DeviceType.CUDA, 1)
    f32 = devmm.DType(2, 32)
    for value, names in ((d, ["type", "index"]), (f32, ["code", "bits", "lanes"])):
        assert dataclasses.is_dataclass(value)
        assert [f.name for f in dataclasses.fields(value)] == names
        assert type(value).__match_args__ == tuple(names)
        assert type(value).__slots__ == tuple(names) and not hasattr(value, "__dict__")
        for name in names:
            with pytest.raises(dataclasses.FrozenInstanceError, match=f"'{name}'"):
                setattr(value, name, 1)
    assert dataclasses.asdict(d) == {"type": devmm.DeviceType.CUDA, "index": 1}
    assert dataclasses.astuple(f32) == (2, 32, 1)
    assert dataclasses.replace(d, index=3) == devmm.Device.from_string("cuda:3")
    assert dataclasses.replace(f32, lanes=4) == devmm.DType(2, 32, 4)
    # replace builds through the constructor, so the core's checks still run.
    with pytest.raises(ValueError, match="out of range"):
        dataclasses.replace(d, index=-1)
    with pytest.raises(ValueError, match="bits"):
        dataclasses.replace(f32, bits=0)
    [field] = [f for f in dataclasses.fields(devmm.Device) if f.name == "index"]
    assert field.default == 0
    assert [f.default for f in dataclasses.fields(devmm.DType)][2] == 1


def test_devices_and_dtypes_match_patterns_by_field() -> None:
    match devmm.Device.from_string("rocm:2"):
        case devmm.Device(devmm.DeviceType.ROCM, index):
            assert index == 2
        case _:
            pytest.fail("no match")
    match devmm.DType.from_string("bfloat16"):
        case devmm.DType(code=4, bits=bits):
            assert bits == 16
        case _:
            pytest.fail("no match")


def test_device_fields_keep_what_the_core_read() -> None:
    for spelling in (devmm.DeviceType.ROCM, 10, "rocm"):
        d = devmm.Device(spelling, 1)
        assert d.type is devmm.DeviceType.ROCM and type(d.index) is int
        assert d == devmm.Device.from_string("rocm:1") and hash(d) == hash(devmm.Device.from_string("rocm:1"))
    with pytest.raises(ValueError, match="not a valid DeviceType"):
        devmm.Device(4)
    with pytest.raises(ValueError, match="unknown device type \"gpu\""):
        devmm.Device("gpu")


def test_devices_and_dtypes_pickle_and_copy_by_value() -> None:
    import copy
    import pickle

    for value in (devmm.Device.from_string("cuda:3"), devmm.DType(2, 32, 4), devmm.DType(17, 4)):
        for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
            assert pickle.loads(pickle.dumps(value, protocol)) == value
        assert copy.copy(value) == value and copy.deepcopy(value) == value


def test_device_strings_always_carry_the_ordinal_and_read_back() -> None:
    for text, expected in (("cpu", "cpu:0"), ("cuda", "cuda:0"), ("cuda_host:3", "cuda_host:3"), ("rocm:007", "rocm:7")):
        d = devmm.Device.from_string(text)
        assert str(d) == expected and devmm.Device.from_string(str(d)) == d


def test_dtype_from_any_reads_objects_with_numpy_kind_and_itemsize() -> None:
    # The seed duck-types NumPy dtypes: anything with a `kind` character and
    # an `itemsize` in bytes, without NumPy.
    class Duck:
        def __init__(self, kind: str, itemsize: int) -> None:
            self.kind, self.itemsize = kind, itemsize

    assert devmm.DType.from_any(Duck("f", 2)) == devmm.DType.from_string("float16")
    assert devmm.DType.from_any(Duck("u", 8)) == devmm.DType.from_string("uint64")
    assert devmm.DType.from_any(Duck("b", 1)) == devmm.DType.from_string("bool")
    assert devmm.DType.from_any(Duck("c", 16)) == devmm.DType.from_string("complex128")
    assert devmm.empty((2,), Duck("i", 4)).dtype == devmm.DType.from_string("int32")
    with pytest.raises(ValueError, match="kind 'V' with itemsize 4 has no DLPack DLDataType encoding"):
        devmm.DType.from_any(Duck("V", 4))
    with pytest.raises(ValueError, match="1 to 31 bytes"):
        devmm.DType.from_any(Duck("f", 64))


def test_dtype_from_any_hands_a_dtype_back_itself() -> None:
    f32 = devmm.DType(2, 32)
    assert devmm.DType.from_any(f32) is f32


def test_standard_dtypes_are_module_constants_at_the_seed_path() -> None:
    from devmm._core import dtypes

    expected = {
        "bool_": (6, 8), "int8": (0, 8), "int16": (0, 16), "int32": (0, 32), "int64": (0, 64),
        "uint8": (1, 8), "uint16": (1, 16), "uint32": (1, 32), "uint64": (1, 64),
        "float16": (2, 16), "float32": (2, 32), "float64": (2, 64), "bfloat16": (4, 16),
        "complex64": (5, 64), "complex128": (5, 128),
    }
    for name, (code, bits) in expected.items():
        dtype = getattr(dtypes, name)
        assert (dtype.code, dtype.bits, dtype.lanes, dtype.itemsize) == (code, bits, 1, bits // 8), name
    assert dtypes.DType is devmm.DType and sorted(dtypes.__all__) == sorted(["DType", *expected])
    from devmm._core.device import Device, DeviceType

    assert (Device, DeviceType) == (devmm.Device, devmm.DeviceType)


def test_values_the_package_hands_out_are_the_dataclasses() -> None:
    import dataclasses

    t = devmm.empty((2, 3), "float32", layout=devmm.RowMajor())
    assert type(t.device) is devmm.Device and type(t.dtype) is devmm.DType
    assert dataclasses.is_dataclass(t.device) and t.device == devmm.Device.from_string("cpu")
    assert t.dtype == devmm.DType(2, 32)
    assert type(devmm.default_device()) is devmm.Device
    assert type(devmm.runtime_for("cpu").devices()[0]) is devmm.Device
    t.free()


def test_a_devices_dlpack_pair_is_its_type_code_and_ordinal() -> None:
    # The seed's contract for Device (its spec: `(int(type), index)`), for
    # every type. A tensor in pinned or managed memory still reports device
    # id 0, as dlpack.h asks of producers (the core's Device::dlpack_device).
    for ty in devmm.DeviceType:
        for index in (0, 3, 2**31 - 1):
            assert devmm.Device(ty, index).__dlpack_device__() == (int(ty), index)


def test_importing_the_dtypes_and_reading_names_imports_no_numpy() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from devmm._core.dtypes import DType, float32\n"
        "assert DType.from_any('float32') == float32 == DType(2, 32)\n"
        "assert DType.from_any(type('Duck', (), {'kind': 'f', 'itemsize': 4})()) == float32\n"
        "assert 'numpy' not in sys.modules, 'numpy was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_handed_out_values_are_made_once_and_stay_right_past_the_cache() -> None:
    t = devmm.empty((2,), "float32")
    assert t.dtype is t.dtype and t.device is t.device
    # More distinct dtypes than the extension keeps instances of, each read
    # back right, as arguments (by identity, twice) and as results.
    dtypes = [devmm.DType(2, 32, lanes) for lanes in range(1, 50)]
    for _ in range(2):
        for dtype in dtypes:
            made = devmm.empty((1,), dtype, layout=devmm.RowMajor())
            assert made.dtype == dtype and made.buffer.nbytes == dtype.itemsize


@pytest.mark.parametrize(
    "make",
    [
        lambda: devmm.Device(True),
        lambda: devmm.Device(devmm.DeviceType.CPU, True),
        lambda: devmm.Device(devmm.DeviceType.CPU, False),
        lambda: devmm.DType(True, 8),
        lambda: devmm.DType(1, True),
        lambda: devmm.DType(2, 32, True),
    ],
)
def test_a_bool_is_no_int_field(make: Callable[[], object]) -> None:
    # Python counts `True` as the int 1, but no device or dtype field means it.
    with pytest.raises(TypeError, match="expected an int, got bool"):
        make()


def test_with_device_enters_and_nests_on_its_thread() -> None:
    cpu = devmm.Device("cpu")
    with cpu as entered:
        assert entered is cpu
        with devmm.Device.from_string("cpu:0"):
            pass
    # Leaving a block that was never entered says so.
    with pytest.raises(RuntimeError, match=r"leaving a `with cpu:0:` block this thread did not enter: a device block ends on the thread that entered it"):
        cpu.__exit__(None, None, None)
    # A block is its thread's: another thread has entered none.
    errors: list[BaseException] = []
    with cpu:
        worker = threading.Thread(target=lambda: _exit_into(cpu, errors))
        worker.start()
        worker.join()
    assert len(errors) == 1 and "did not enter" in str(errors[0])


def test_a_refused_device_exit_leaves_the_block_s_own_exception_in_place() -> None:
    # The caller handles the block's exception: the refusal is a note on it.
    raised = KeyError("inside")
    devmm.Device("cpu").__exit__(KeyError, raised, None)
    assert raised.__notes__ == ["leaving a `with cpu:0:` block this thread did not enter: a device block ends on the thread that entered it"]


def _exit_into(device: devmm.Device, errors: list[BaseException]) -> None:
    try:
        device.__exit__(None, None, None)
    except RuntimeError as e:
        errors.append(e)


def test_with_device_for_a_runtime_not_loaded_raises_and_enters_nothing() -> None:
    # No ROCm runtime here (nor on the GPU machine the suite also runs on).
    with pytest.raises(devmm.RuntimeUnavailableError):
        with devmm.Device("rocm", 1):
            pass
    with pytest.raises(RuntimeError, match="did not enter"):
        devmm.Device("rocm", 1).__exit__(None, None, None)


def test_a_dataclass_subclass_of_device_is_checked_as_device_is() -> None:
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Tagged(devmm.Device):
        tag: str = ""

    tagged = Tagged("cuda", 1, tag="t")
    assert tagged.type is devmm.DeviceType.CUDA and tagged.index == 1 and str(tagged) == "cuda:1"
    with pytest.raises(ValueError, match="out of range"):
        Tagged("cuda", -1)
