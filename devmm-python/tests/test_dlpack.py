"""Tensor.__dlpack__ / __dlpack_device__ per the DLPack Python protocol."""

import ctypes
import gc
import re
import threading

import numpy as np
import pytest

import devmm
from devmm._dlpack import _abi

PyCapsule_GetName = ctypes.pythonapi.PyCapsule_GetName
PyCapsule_GetName.restype = ctypes.c_char_p
PyCapsule_GetName.argtypes = [ctypes.py_object]


PyCapsule_GetPointer = ctypes.pythonapi.PyCapsule_GetPointer
PyCapsule_GetPointer.restype = ctypes.c_void_p
PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def capsule_name(capsule: object) -> bytes:
    return PyCapsule_GetName(capsule)


def managed_tensor(capsule: object) -> _abi.DLManagedTensorVersioned | _abi.DLManagedTensor:
    """The managed struct of an unconsumed capsule, read through the C ABI
    (a view into the export: keep the capsule alive while reading it)."""
    name = capsule_name(capsule)
    managed = PyCapsule_GetPointer(capsule, name)
    assert managed
    if name == b"dltensor_versioned":
        return _abi.DLManagedTensorVersioned.from_address(managed)
    return _abi.DLManagedTensor.from_address(managed)


def capsule_data_pointer(capsule: object) -> int | None:
    """`dl_tensor.data` of an unconsumed capsule."""
    return managed_tensor(capsule).dl_tensor.data


def test_the_abi_mirrors_have_the_header_s_sizes() -> None:
    # dlpack.h 1.1 on a 64-bit ABI.
    sizes = [ctypes.sizeof(c) for c in (_abi.DLDevice, _abi.DLDataType, _abi.DLTensor)]
    assert sizes == [8, 4, 48]
    assert ctypes.sizeof(_abi.DLManagedTensor) == 64
    assert ctypes.sizeof(_abi.DLManagedTensorVersioned) == 80
    assert _abi.DLManagedTensorVersioned.dl_tensor.offset == 32
    assert _abi.DLPACK_VERSION == (1, 1)
    assert (_abi.DLPACK_FLAG_BITMASK_READ_ONLY, _abi.DLPACK_FLAG_BITMASK_IS_COPIED) == (1, 2)


def test_capsules_read_through_the_abi_mirrors() -> None:
    t = devmm.empty((2, 3), "float32", layout=devmm.Aligned(devmm.RowMajor(), unit_stride_alignment=16))
    for max_version, stamped in (((1, 0), (1, 0)), ((1, 1), (1, 1)), ((2, 5), (1, 1))):
        capsule = t.to_read_only().__dlpack__(max_version=max_version)
        managed = managed_tensor(capsule)
        assert isinstance(managed, _abi.DLManagedTensorVersioned)
        assert (managed.version.major, managed.version.minor) == stamped
        assert managed.flags == _abi.DLPACK_FLAG_BITMASK_READ_ONLY
    capsule = t.__dlpack__()
    dl = managed_tensor(capsule).dl_tensor
    assert (dl.device.device_type, dl.device.device_id) == t.__dlpack_device__()
    assert (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes) == (2, 32, 1)
    assert dl.ndim == 2 and (dl.shape[0], dl.shape[1]) == t.shape
    assert (dl.strides[0], dl.strides[1]) == t.strides == (4, 1)
    assert dl.data == t.data_ptr and dl.byte_offset == 0


def test_version_negotiation_picks_the_capsule_flavour() -> None:
    t = devmm.empty((2, 2), "float32")
    assert capsule_name(t.__dlpack__(max_version=(1, 0))) == b"dltensor_versioned"
    assert capsule_name(t.__dlpack__(max_version=(1, 3))) == b"dltensor_versioned"
    assert capsule_name(t.__dlpack__()) == b"dltensor"
    assert capsule_name(t.__dlpack__(max_version=(0, 8))) == b"dltensor"
    assert t.__dlpack_device__() == (1, 0)


def test_numpy_imports_zero_copy_with_the_right_fields(stats: devmm.StatisticsAdaptor) -> None:
    t = devmm.empty((3, 4), "int16", layout=devmm.ColMajor(), mr=stats)
    a = np.from_dlpack(t)
    assert a.ctypes.data == t.buffer.ptr == t.data_ptr
    assert (a.shape, a.dtype, a.strides) == ((3, 4), np.dtype("int16"), (2, 6))
    a[...] = np.arange(12, dtype=np.int16).reshape(3, 4)
    assert t.buffer.copy_to_host(nbytes=4).tobytes() == np.array([0, 4], dtype=np.int16).tobytes()


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int64", "float16", "float64", "complex64", "complex128"])
def test_dtypes_round_trip_through_numpy(dtype: str) -> None:
    assert np.from_dlpack(devmm.empty((5,), dtype)).dtype == np.dtype(dtype)


def test_padded_layouts_keep_byte_strides() -> None:
    t = devmm.empty((4, 3), "float32", layout=devmm.Aligned(devmm.RowMajor(), 128, 256))
    a = np.from_dlpack(t)
    assert a.strides == (128, 4)
    assert a.ctypes.data == t.data_ptr and a.ctypes.data % 256 == 0


def test_refusals_are_buffer_errors() -> None:
    t = devmm.empty((2,), "float32")
    refusal = (
        "copy=True is not supported; devmm exports are always zero-copy; "
        "call Tensor.to(device) for a copy and export that"
    )
    with pytest.raises(BufferError, match=f"^{re.escape(refusal)}$"):
        t.__dlpack__(copy=True)
    with pytest.raises(BufferError, match="dl_device"):
        t.__dlpack__(dl_device=(2, 0))
    assert capsule_name(t.__dlpack__(copy=False, dl_device=(1, 0))) == b"dltensor"
    readonly = t.to_read_only()
    with pytest.raises(BufferError, match="read-only"):
        readonly.__dlpack__()
    assert capsule_name(readonly.__dlpack__(max_version=(1, 0))) == b"dltensor_versioned"
    t.buffer.free()
    with pytest.raises(BufferError, match="was freed"):
        t.__dlpack__(max_version=(1, 0))


def test_stream_values_for_the_cpu() -> None:
    # None, or -1 ("do not synchronize", on every device); any other value
    # names a stream, which the cpu does not have.
    t = devmm.empty((2,), "float32")
    t.__dlpack__(stream=None)
    assert capsule_name(t.__dlpack__(stream=-1, max_version=(1, 0))) == b"dltensor_versioned"
    for refused in (0, 1, 2, 5):
        with pytest.raises(BufferError, match="has no streams"):
            t.__dlpack__(stream=refused)
    with pytest.raises(BufferError, match="stream"):
        t.__dlpack__(stream=True)


@pytest.mark.parametrize("flag", [True, False])
def test_a_bool_stream_is_refused_as_no_stream_handle(flag: bool) -> None:
    # `True` is an int to Python, but names no stream: refused before any
    # device reads it as stream 1 (or False as 0).
    for exporter in (devmm.empty((2,), "float32"), devmm.empty((2,), "float32").buffer):
        with pytest.raises(BufferError, match=rf"stream must be None or an int per the DLPack protocol, got {flag}$"):
            exporter.__dlpack__(stream=flag)


@pytest.mark.parametrize("keyword", ["stream", "max_version"])
def test_numpy_integers_are_no_protocol_ints(keyword: str) -> None:
    # The protocol passes Python ints; the seed checks `isinstance(x, int)`,
    # which a NumPy integer is not.
    value = np.int64(-1) if keyword == "stream" else (np.int64(1), 0)
    for exporter in (devmm.empty((2,), "float32"), devmm.empty((2,), "float32").buffer):
        with pytest.raises(BufferError, match=rf"{keyword} must be None or .*, got "):
            exporter.__dlpack__(**{keyword: value})  # type: ignore[arg-type]


def test_a_version_past_32_bits_asks_for_the_newest() -> None:
    t = devmm.empty((2,), "float32")
    assert stamped_version(t.__dlpack__(max_version=(1, 2**40))) == (1, 1)
    assert stamped_version(t.__dlpack__(max_version=(2**40, 0))) == (1, 1)
    with pytest.raises(BufferError, match=r"got \(1, -1\)"):
        t.__dlpack__(max_version=(1, -1))


def test_max_version_is_any_pair_of_ints() -> None:
    # As `major, minor = max_version` reads it: a list or any other pair.
    t = devmm.empty((2,), "float32")
    for exporter in (t, t.buffer):
        assert capsule_name(exporter.__dlpack__(max_version=[1, 0])) == b"dltensor_versioned"
        assert capsule_name(exporter.__dlpack__(max_version=iter((1, 1)))) == b"dltensor_versioned"
        assert capsule_name(exporter.__dlpack__(max_version=[0, 8])) == b"dltensor"
        for refused in ([True, 0], [1], [1, 2, 3], {"a": 1}, 10):
            with pytest.raises(BufferError, match="max_version"):
                exporter.__dlpack__(max_version=refused)


def stamped_version(capsule: object) -> tuple[int, int]:
    managed = PyCapsule_GetPointer(capsule, b"dltensor_versioned")
    return (ctypes.c_uint32.from_address(managed).value, ctypes.c_uint32.from_address(managed + 4).value)


def test_versioned_exports_are_stamped_no_newer_than_a_1_x_consumer_asks() -> None:
    t = devmm.empty((2,), "float32")
    assert stamped_version(t.__dlpack__(max_version=(1, 0))) == (1, 0)
    assert stamped_version(t.__dlpack__(max_version=(1, 1))) == (1, 1)
    assert stamped_version(t.__dlpack__(max_version=(1, 9))) == (1, 1)
    assert stamped_version(t.__dlpack__(max_version=(2, 0))) == (1, 1)


def test_keywords_read_as_the_protocol_spells_them() -> None:
    t = devmm.empty((2,), "float32")
    assert capsule_name(t.__dlpack__(dl_device=[1, 0], copy=0, max_version=(1, 1))) == b"dltensor_versioned"
    with pytest.raises(BufferError, match="copy=True"):
        t.__dlpack__(copy=1)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_version": (1,)}, "max_version"),
        ({"max_version": (1, 2, 3)}, "max_version"),
        ({"max_version": (-1, 0)}, "max_version"),
        ({"max_version": "1.0"}, "max_version"),
        ({"max_version": (True, 0)}, "max_version"),
        ({"max_version": (1, False)}, "max_version"),
        ({"stream": "x"}, "stream"),
        ({"stream": 2**70}, "stream must be a stream handle that fits in 64 bits, or -1, got 1180591620717411303424"),
        ({"stream": -5}, "has no streams"),
        ({"dl_device": (1,)}, "dl_device"),
        ({"dl_device": "cpu"}, "dl_device"),
        ({"dl_device": (1, 0, 0)}, "dl_device"),
        ({"copy": "yes"}, "copy"),
        ({"copy": True}, "copy=True"),
        ({"dl_device": (2, 0)}, "device"),
    ],
)
def test_every_dlpack_refusal_is_a_buffer_error(kwargs: dict[str, object], match: str) -> None:
    t = devmm.empty((2,), "float32")
    with pytest.raises(BufferError, match=match):
        t.__dlpack__(**kwargs)  # type: ignore[arg-type]


def test_unconsumed_capsules_release_their_export(stats: devmm.StatisticsAdaptor) -> None:
    t = devmm.empty((8,), "float64", mr=stats)
    capsules = [t.__dlpack__(), t.__dlpack__(max_version=(1, 0))]
    assert t.buffer.live_exports == 2
    t.buffer.free()
    assert t.buffer.closed and stats.current_bytes == 64  # exports hold the memory
    del capsules
    gc.collect()
    assert t.buffer.live_exports == 0 and stats.current_bytes == 0


@pytest.mark.parametrize("freed_through", ["buffer", "tensor"])
def test_free_while_a_consumer_holds_the_memory(stats: devmm.StatisticsAdaptor, freed_through: str) -> None:
    t = devmm.empty((4,), "float32", layout=devmm.RowMajor(), mr=stats)
    a = np.from_dlpack(t)
    a[...] = 7.0
    (t.buffer if freed_through == "buffer" else t).free()
    assert t.buffer.closed and t.buffer.live_exports == 1
    assert stats.current_bytes == 16 and float(a.sum()) == 28.0
    del a
    gc.collect()
    assert stats.current_bytes == 0 and t.buffer.live_exports == 0


def test_exports_outlive_every_devmm_handle(stats: devmm.StatisticsAdaptor) -> None:
    a = np.from_dlpack(devmm.empty((16,), "uint8", layout=devmm.RowMajor(), mr=stats))
    gc.collect()
    a[...] = 3
    assert stats.current_bytes == 16 and int(a.sum()) == 48
    del a
    gc.collect()
    assert stats.current_bytes == 0


def test_consumers_may_release_from_another_thread(stats: devmm.StatisticsAdaptor) -> None:
    t = devmm.empty((32,), "float32", mr=stats)
    holder = [np.from_dlpack(t)]
    t.buffer.free()

    def release() -> None:
        holder.clear()
        gc.collect()

    worker = threading.Thread(target=release)
    worker.start()
    worker.join()
    assert stats.current_bytes == 0


def test_zero_size_tensors_export_a_null_pointer() -> None:
    t = devmm.empty((0, 3), "float32")
    for max_version in ((1, 0), None):
        assert capsule_data_pointer(t.__dlpack__(max_version=max_version)) is None
    full = devmm.empty((2, 3), "float32")
    for max_version in ((1, 0), None):
        assert capsule_data_pointer(full.__dlpack__(max_version=max_version)) == full.data_ptr != 0
    a = np.from_dlpack(t)
    assert a.shape == (0, 3) and a.size == 0


def test_python_resources_free_exports_on_release() -> None:
    freed: list[int] = []
    blocks: dict[int, ctypes.Array[ctypes.c_char]] = {}

    def alloc(nbytes: int, stream: devmm.Stream) -> int:
        block = ctypes.create_string_buffer(nbytes)
        blocks[ctypes.addressof(block)] = block
        return ctypes.addressof(block)

    def dealloc(ptr: int, nbytes: int, stream: devmm.Stream) -> None:
        freed.append(ptr)
        del blocks[ptr]

    mr = devmm.CallbackMemoryResource(alloc, dealloc)
    a = np.from_dlpack(devmm.empty((10,), "uint8", mr=mr))
    assert not freed
    del a
    gc.collect()
    assert len(freed) == 1 and not blocks


def test_conformance_suite_passes_on_the_cpu(cpu: devmm.Device) -> None:
    devmm.testing.dlpack_conformance(cpu)
    devmm.testing.dlpack_conformance("cpu")


def test_the_conformance_suite_exports_from_the_current_resource(cpu: devmm.Device) -> None:
    # As the seed's: the tensors come from the device's current resource,
    # so a resource and its runtime are checked together.
    checked = devmm.testing.RecordingMemoryResource()
    with devmm.using_memory_resource(checked):
        devmm.testing.dlpack_conformance(cpu)
    # Each block went back once (the null pointers of zero-byte tensors are
    # devmm's to drop, not the resource's).
    blocks = sorted(call[1:3] for call in checked.calls if call[0] == "allocate" and call[1] != 0)
    assert blocks and not checked.live
    assert sorted(call[1:3] for call in checked.calls if call[0] == "deallocate") == blocks
    # One that cannot allocate fails the suite, saying why.
    from devmm.mrs.cpu import MallocMemoryResource

    with devmm.using_memory_resource(devmm.LimitingAdaptor(MallocMemoryResource(), 1)):
        with pytest.raises(AssertionError, match="FAILED versioned_flavor: empty.*would exceed the 1-byte limit"):
            devmm.testing.dlpack_conformance(cpu)


import devmm.testing  # noqa: E402  (imported last: the module under test above is devmm)


@pytest.mark.parametrize("make", ["tensor", "buffer"])
def test_an_export_keeps_its_producer_object_until_the_consumer_lets_go(make: str) -> None:
    # As the seed's holder keeps its Tensor: a weak reference to the
    # producer lives as long as a capsule or a consumer's array does.
    import weakref

    t = devmm.empty((2, 2), "float32", layout=devmm.RowMajor())
    producer = t if make == "tensor" else devmm.DeviceBuffer(16)
    ref = weakref.ref(producer)
    capsule = producer.__dlpack__(max_version=(1, 1))
    held = np.from_dlpack(producer)
    del t, producer
    gc.collect()
    assert ref() is not None
    del capsule  # an unconsumed capsule lets go when it dies
    gc.collect()
    assert ref() is not None
    del held
    gc.collect()
    assert ref() is None


def test_a_consumer_on_another_thread_lets_the_producer_go() -> None:
    import weakref

    t = devmm.empty((4,), "uint8")
    ref = weakref.ref(t)
    held = [np.from_dlpack(t)]
    del t
    worker = threading.Thread(target=held.clear)
    worker.start()
    worker.join()
    gc.collect()
    assert ref() is None


def run_isolated(code: str) -> None:
    """Runs `code` in a fresh interpreter, so that a crash (an abort on a
    double free, a stack overflow) fails the test rather than the suite."""
    import subprocess
    import sys
    import textwrap

    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"exit status {done.returncode}\n{done.stdout}\n{done.stderr}"
    assert done.stdout.strip().endswith("ok"), done.stdout


@pytest.mark.parametrize("max_version", [(1, 1), None])
def test_a_consumer_calling_the_deleter_twice_gets_a_no_op_the_second_time(max_version: object) -> None:
    run_isolated(
        f"""
        import ctypes
        import devmm
        from devmm._dlpack import _abi

        get_name = ctypes.pythonapi.PyCapsule_GetName
        get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
        get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
        get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        set_name = ctypes.pythonapi.PyCapsule_SetName
        set_name.argtypes = [ctypes.py_object, ctypes.c_char_p]

        t = devmm.empty((3, 4), "float32")
        for _ in range(3):
            capsule = t.__dlpack__(max_version={max_version!r})
            name = get_name(capsule)
            raw = get_pointer(capsule, name)
            set_name(capsule, b"used_" + name)  # consumed: the deleter is ours to call
            struct = _abi.DLManagedTensorVersioned if name == b"dltensor_versioned" else _abi.DLManagedTensor
            managed = struct.from_address(raw)
            deleter = managed.deleter
            pointer = ctypes.cast(raw, ctypes.POINTER(struct))
            assert t.buffer.live_exports == 1
            deleter(pointer)
            assert t.buffer.live_exports == 0
            deleter(pointer)  # a protocol violation: must be a no-op
            assert t.buffer.live_exports == 0
            del capsule
        t.buffer.free()
        print("ok")
        """
    )


def test_an_extent_beyond_dlpack_s_int64_is_a_buffer_error() -> None:
    # Empty, so any extent is a valid layout; DLPack's int64 cannot carry it.
    t = devmm.empty((0, 2**63), "uint8")
    with pytest.raises(BufferError, match="does not fit DLPack's int64"):
        t.__dlpack__(max_version=(1, 1))
    assert t.buffer.live_exports == 0


@pytest.mark.parametrize("dtype", [np.longdouble, np.clongdouble, "f16", "c32"])
def test_numpy_s_long_double_is_refused_as_a_dtype(dtype: object) -> None:
    if np.dtype(np.longdouble).itemsize == np.dtype(np.float64).itemsize:
        pytest.fail("this platform's long double is a double: the test needs an x86-64 NumPy")
    with pytest.raises(ValueError, match="longdouble"):
        devmm.empty((2,), dtype)


def test_torch_complex32_is_named_in_its_refusal() -> None:
    # In a fresh interpreter: torch loads its CUDA runtime library, which
    # changes what devmm's runtime discovery finds for the tests after.
    run_isolated(
        """
        import re
        import torch
        import devmm

        try:
            devmm.empty((2,), torch.complex32)
        except ValueError as e:
            assert re.search(r"torch\\.complex32", str(e)), e
        else:
            raise AssertionError("torch.complex32 was accepted")
        print("ok")
        """
    )


@pytest.mark.parametrize(
    "step",
    [
        "np.from_dlpack(devmm.from_dlpack(x))",
        "devmm.from_dlpack(x)",
        "devmm.from_dlpack(x.__dlpack__(max_version=(1, 1)))",
        "devmm.from_dlpack(x.buffer)",
        "np.from_dlpack(devmm.from_dlpack(x)).view(Sub)",
    ],
)
def test_a_long_chain_of_imports_and_exports_releases_without_recursing(step: str) -> None:
    # Each devmm import of a devmm export (or of a NumPy view of one, of a
    # subclass too) takes the original memory: no chain of deleters forms,
    # at any depth.
    run_isolated(
        f"""
        import gc
        import numpy as np
        import devmm

        class Sub(np.ndarray):
            pass

        first = np.arange(6, dtype=np.uint8)
        x = devmm.from_dlpack(first) if "buffer" in {step!r} else first
        before = devmm.foreign_memory()["live_count"]
        for _ in range(100_000):
            x = {step}
        assert bytes(np.asarray(x)) == bytes(range(6)), np.asarray(x)
        assert devmm.foreign_memory()["live_count"] <= before + 2, devmm.foreign_memory()
        del x
        gc.collect()
        print("ok")
        """
    )


@pytest.mark.parametrize(
    "step",
    ["np.asarray(devmm.from_dlpack(x))", "torch.from_dlpack(devmm.from_dlpack(x))"],
)
def test_a_chain_through_other_producers_releases_iteratively(step: str) -> None:
    # Here each import holds the producer's export, which holds the array,
    # which holds the devmm import before it: devmm releases the chain one
    # link after the other, where the release recursed and overflowed the stack.
    run_isolated(
        f"""
        import gc
        import numpy as np
        import torch
        import devmm

        x = np.arange(6, dtype=np.uint8)
        for _ in range(100_000):
            x = {step}
        assert bytes(np.asarray(x)) == bytes(range(6))
        del x
        gc.collect()
        assert devmm.foreign_memory()["live_count"] == 0, devmm.foreign_memory()
        print("ok")
        """
    )


def test_a_numpy_subclass_is_asked_for_its_device() -> None:
    # NumPy's own ndarray is always on the CPU, so its import skips the
    # question; a subclass may answer otherwise and is asked.
    class Asked(np.ndarray):
        asked = 0

        def __dlpack_device__(self) -> tuple[int, int]:
            type(self).asked += 1
            return super().__dlpack_device__()

    t = devmm.from_dlpack(np.arange(3, dtype=np.int32).view(Asked))
    assert Asked.asked == 1
    assert t.device == devmm.Device.from_string("cpu") and t.shape == (3,)
    assert devmm.from_dlpack(np.arange(3)).device == devmm.Device.from_string("cpu")


def test_imports_before_numpy_is_imported_and_after() -> None:
    # devmm learns NumPy's array type once NumPy is imported: imports
    # before it work, and after it a NumPy view of a devmm export is still
    # taken as that export's buffer.
    run_isolated(
        """
        import sys
        import weakref
        import devmm

        class Protocol:
            # Only the protocol's methods (a devmm tensor itself would be
            # taken through its C exchange API, not through __dlpack__).
            def __init__(self, t):
                self.t = t

            def __dlpack__(self, **kwargs):
                return self.t.__dlpack__(**kwargs)

            def __dlpack_device__(self):
                return self.t.__dlpack_device__()

        t = devmm.from_dlpack(Protocol(devmm.empty((4,), "uint8")))
        assert "numpy" not in sys.modules and t.shape == (4,)
        import numpy as np

        x = devmm.empty((4,), "uint8")
        for view in (lambda a: a, lambda a: a[1:], lambda a: a.reshape(2, 2)[1:]):
            array = view(np.from_dlpack(x))
            again = devmm.from_dlpack(array)
            # It views x's buffer and lets NumPy's array go at once, where
            # it held NumPy's export of the array, which holds the array.
            gone = weakref.ref(array)
            del array
            assert gone() is None, "the import holds NumPy's array"
            assert x.buffer.ptr <= again.buffer.ptr < x.buffer.ptr + 4
        print("ok")
        """
    )
