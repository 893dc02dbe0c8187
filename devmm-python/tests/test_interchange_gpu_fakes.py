"""Interchange on GPU memory over the repository's fake CUDA runtime and
HIP (host memory behind device addresses, calls recorded): the CUDA Array
Interface as CuPy and Numba read it (checked as dictionaries), DLPack
import with a stream hand-off, rmm's stream surface and raw copies.
scripts/test-python.sh builds the fakes and names them in
DEVMM_TEST_FAKE_CUDART / DEVMM_TEST_FAKE_HIP."""

import os
from collections.abc import Callable
import subprocess
import sys
import textwrap

import pytest

COMMON = textwrap.dedent(
    """
    import gc
    import numpy as np
    import devmm
    gpu = devmm.Device.from_string("{device}:0")
    rt = devmm.runtime_for(gpu)

    # rmm's stream surface.
    assert rt.default_stream(gpu).is_default()
    for which in (devmm.DEFAULT, devmm.LEGACY_DEFAULT, devmm.PER_THREAD_DEFAULT):
        assert rt.stream(gpu, which).is_default()
    created = rt.create_stream(gpu)
    assert not created.is_default()
    pool = devmm.StreamPool(4, devmm.StreamFlags.NON_BLOCKING, device=gpu)
    handles = {{pool.get_stream().handle for _ in range(8)}}
    assert len(handles) == 4 and 0 not in handles
    assert pool.get_stream(1).handle in handles
    assert not pool.get_stream(0).is_default()

    # Raw copies: synchronous on the default stream, ordered on another.
    src = devmm.DeviceBuffer.to_device(b"abcdef", device=gpu)
    dst = devmm.DeviceBuffer(6, device=gpu)
    devmm.copy_host_to_ptr(b"\\0" * 6, dst.ptr, stream=rt.default_stream(gpu))
    devmm.copy_device_to_ptr(src.ptr, dst.ptr, 3, stream=created)
    created.synchronize()
    hb = bytearray(6)
    devmm.copy_ptr_to_host(dst.ptr, hb, stream=rt.default_stream(gpu))
    assert hb == bytearray(b"abc\\0\\0\\0"), hb
    assert dst.copy_to_host(offset=1, nbytes=2, stream=created).tolist() == [98, 99]

    # DLPack import of a device tensor, with the producer ordered before
    # our stream; the import is foreign memory.
    t = devmm.empty((2, 3), "int32", device=gpu)
    before = devmm.foreign_memory()["live_count"]
    imported = devmm.from_dlpack(t, stream=created)
    assert imported.device == gpu and imported.data_ptr == t.data_ptr
    assert imported.buffer.stream == created
    assert devmm.foreign_memory()["live_count"] == before + 1
    assert t.buffer.live_exports == 1
    del imported
    gc.collect()
    assert t.buffer.live_exports == 0
    assert devmm.foreign_memory()["live_count"] == before

    # DLPack 1.3's C exchange API: the current work stream of the device is
    # the runtime's default stream, the one devmm queues work on.
    import ctypes
    from devmm._dlpack import _abi
    api = _abi.DLPackExchangeAPI.of(devmm.Tensor)
    current = ctypes.c_void_p(0x5EED)
    assert api.current_work_stream(t.__dlpack_device__()[0], 0, ctypes.byref(current)) == 0
    assert (current.value or 0) == rt.default_stream(gpu).handle, current

    # Device memory has no host views.
    for attempt in (lambda: memoryview(t), lambda: bytes(src)):
        try:
            attempt()
        except BufferError:
            pass
        else:
            raise AssertionError("device memory must refuse the buffer protocol")
    try:
        t.__array_interface__
    except AttributeError:
        pass
    else:
        raise AssertionError("device memory has no __array_interface__")
    """
)

CUDA_ONLY = textwrap.dedent(
    """
    import devmm.mrs.cuda
    # The CUDA Array Interface, as CuPy and Numba read it.
    s = rt.create_stream(gpu)
    f = devmm.empty((2, 3), "float32", layout=devmm.ColMajor(), device=gpu, stream=s)
    cai = f.__cuda_array_interface__
    assert cai == {{
        "shape": (2, 3), "typestr": "<f4", "data": (f.data_ptr, False),
        "strides": (4, 8), "version": 3, "stream": s.handle, "mask": None,
    }}, cai
    on_default = devmm.empty((4,), "uint8", device=gpu)
    assert on_default.__cuda_array_interface__["stream"] == 1, "the default stream is spelled 1"
    assert on_default.__cuda_array_interface__["strides"] is None
    assert on_default.to_read_only().__cuda_array_interface__["data"] == (on_default.data_ptr, True)
    buf = devmm.DeviceBuffer(10, device=gpu)
    assert buf.__cuda_array_interface__["shape"] == (10,)
    assert buf.__cuda_array_interface__["typestr"] == "|u1"
    assert buf.__cuda_array_interface__["data"] == (buf.ptr, False)
    pinned = devmm.DeviceBuffer(8, mr=devmm.mrs.cuda.CudaPinnedMemoryResource())
    assert pinned.__cuda_array_interface__["shape"] == (8,)
    assert bytes(pinned) is not None and memoryview(pinned).nbytes == 8, "pinned memory is host memory"
    """
)

PLATFORMS = {
    "cuda": dict(env="DEVMM_TEST_FAKE_CUDART", path_var="DEVMM_CUDART_PATH", device="cuda", extra=CUDA_ONLY),
    "rocm": dict(env="DEVMM_TEST_FAKE_HIP", path_var="DEVMM_HIP_PATH", device="rocm", extra=""),
}


def _run(p: dict[str, str], script: str, fake_library: Callable[[str], str]) -> None:
    """Runs `script` in a fresh interpreter over the platform's fake library,
    whose path is its first argument (for the fake's `fake_*` controls)."""
    library = fake_library(p["env"])
    env = dict(os.environ, **{p["path_var"]: library})
    done = subprocess.run([sys.executable, "-c", script, library], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_interchange_against_the_fake_driver(platform: str, fake_library: Callable[[str], str]) -> None:
    p = PLATFORMS[platform]
    _run(p, COMMON.format(device=p["device"]) + p["extra"].format() + "\nprint('ok')\n", fake_library)


HOST_READERS = textwrap.dedent(
    """
    import ctypes, faulthandler, sys, threading, time
    import numpy as np
    import devmm

    # A reader that waits holding the GIL never lets the releaser run.
    faulthandler.dump_traceback_later(60, exit=True)
    fake = ctypes.CDLL(sys.argv[1])
    gpu = devmm.Device.from_string("{device}:0")
    host = devmm.Device.from_string("{device}_host:0")
    rt = devmm.runtime_for(gpu)
    data = bytes(range(1, 65))
    source = devmm.DeviceBuffer.to_device(data, device=gpu)
    # Not a default stream: a copy queued there is not waited for.
    stream = rt.create_stream(host)
    pinned = devmm.empty((64,), "uint8", device=host, stream=stream, layout=devmm.RowMajor())
    readers = {{
        "np.from_dlpack": lambda: np.from_dlpack(pinned).tobytes(),
        # NumPy itself prefers the buffer protocol: the interface is read as such.
        "__array_interface__": lambda: ctypes.string_at(pinned.__array_interface__["data"][0], 64),
        "memoryview (the buffer protocol)": lambda: memoryview(pinned).tobytes(),
    }}
    reading = threading.Event()

    def release():
        # Python code, so it runs only while the reader lets the GIL go.
        reading.wait()
        time.sleep(0.05)
        fake.fake_release_work()

    for name, read in readers.items():
        devmm.copy_host_to_ptr(bytes(64), pinned.data_ptr, stream=stream)
        stream.synchronize()
        # The copy from the GPU is held until another thread lets it run.
        fake.fake_hold_work(1)
        devmm.copy_device_to_ptr(source.ptr, pinned.data_ptr, 64, stream=stream)
        fake.fake_hold_work(0)
        releaser = threading.Thread(target=release)
        releaser.start()
        reading.set()
        seen = read()
        releaser.join()
        reading.clear()
        stream.synchronize()
        assert seen == data, f"{{name}} read before the queued copy landed: {{seen[:8]!r}}"
    print("ok")
    """
)


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_host_readers_of_pinned_memory_see_the_queued_work(platform: str, fake_library: Callable[[str], str]) -> None:
    """NumPy reads pinned memory as soon as it has the address: `np.from_dlpack`
    names no stream, and `__array_interface__` and the buffer protocol have none.
    Each waits for the tensor's stream first, so a copy queued from the GPU has
    landed when NumPy reads, and waits without the GIL, so the thread that
    lets the copy run (or a host callback the stream runs) is not shut out."""
    p = PLATFORMS[platform]
    _run(p, HOST_READERS.format(device=p["device"]), fake_library)


PER_THREAD_CONSUMER = textwrap.dedent(
    """
    import ctypes, sys
    import devmm
    from devmm import CopyKind

    fake = ctypes.CDLL(sys.argv[1])
    fake.fake_set_stream_delay.argtypes = [ctypes.c_uint64]
    gpu = devmm.Device.from_string("{device}:0")
    rt = devmm.runtime_for(gpu)
    data = bytes(range(1, 65))
    source = devmm.DeviceBuffer.to_device(data, device=gpu)
    producer_stream = rt.create_stream(gpu)
    t = devmm.empty((64,), "uint8", device=gpu, stream=producer_stream)
    seen = {{}}

    class Producer:
        # Only the Python protocol: devmm's consumer passes a stream value.
        def __dlpack_device__(self):
            return t.__dlpack_device__()

        def __dlpack__(self, **kwargs):
            seen["stream"] = kwargs.get("stream")
            return t.__dlpack__(**kwargs)

    per_thread = rt.stream(gpu, devmm.PER_THREAD_DEFAULT)
    # The producer's copy lands 100 ms after it is queued.
    fake.fake_set_stream_delay(100000)
    rt.memcpy(t.data_ptr, source.ptr, 64, CopyKind.DEVICE_TO_DEVICE, producer_stream)
    imported = devmm.from_dlpack(Producer(), stream=per_thread)
    out = devmm.DeviceBuffer(64, device=gpu, stream=per_thread)
    rt.memcpy(out.ptr, imported.data_ptr, 64, CopyKind.DEVICE_TO_DEVICE, per_thread)
    back = bytes(out.copy_to_host(stream=per_thread))
    fake.fake_set_stream_delay(0)
    assert seen["stream"] == {expected}, seen
    assert back == data, f"the consumer read before the producer's copy landed: {{back[:8]!r}}"
    print("ok")
    """
)


@pytest.mark.parametrize(("platform", "expected"), [("cuda", 2), ("rocm", 0)])
def test_a_consumer_on_the_per_thread_stream_passes_a_value_the_protocol_has(
    platform: str, expected: int, fake_library: Callable[[str], str]
) -> None:
    """DLPack names CUDA's per-thread default stream 2 but has no value for
    HIP's (1 and 2 are reserved on ROCm): a consumer on it passes 0, the null
    stream, which the per-thread stream (a blocking stream) waits for, so the
    producer's queued work still comes first."""
    p = PLATFORMS[platform]
    _run(p, PER_THREAD_CONSUMER.format(device=p["device"], expected=expected), fake_library)


EXCHANGE_ORDERING = textwrap.dedent(
    """
    import ctypes, sys
    import devmm
    from devmm._dlpack import _abi

    fake = ctypes.CDLL(sys.argv[1])
    gpu = devmm.Device.from_string("{device}:0")
    rt = devmm.runtime_for(gpu)
    data = bytes(range(1, 65))
    source = devmm.DeviceBuffer.to_device(data, device=gpu)
    scratch = devmm.DeviceBuffer(64, device=gpu)
    # The tensor's own stream, not the device's current work stream, and
    # non-blocking: the legacy default stream does not wait for it.
    side = devmm.StreamPool(1, devmm.StreamFlags.NON_BLOCKING, device=gpu).get_stream()
    t = devmm.empty((64,), "uint8", device=gpu, stream=side, layout=devmm.RowMajor())
    devmm.copy_host_to_ptr(bytes(64), t.data_ptr, stream=side)
    side.synchronize()
    fake.fake_set_stream_delay(ctypes.c_uint64(40_000))
    # Seven delays of other work, then the copy that fills the tensor.
    for _ in range(7):
        devmm.copy_device_to_ptr(source.ptr, scratch.ptr, 64, stream=side)
    devmm.copy_device_to_ptr(source.ptr, t.data_ptr, 64, stream=side)
    # A C consumer of devmm's table (tvm-ffi, PyTorch): the export asks for
    # no stream hand-off, and the consumer orders its reads after the
    # producer's current work stream alone.
    api = _abi.DLPackExchangeAPI.of(devmm.Tensor)
    managed = ctypes.POINTER(_abi.DLManagedTensorVersioned)()
    assert api.managed_tensor_from_py_object_no_sync(t, ctypes.byref(managed)) == 0
    current = ctypes.c_void_p()
    assert api.current_work_stream(*t.__dlpack_device__(), ctypes.byref(current)) == 0
    work = rt.default_stream(gpu)
    assert (current.value or 0) == work.handle, (current.value, work.handle)
    result = devmm.DeviceBuffer(64, device=gpu, stream=work)
    devmm.copy_device_to_ptr(managed.contents.dl_tensor.data, result.ptr, 64, stream=work)
    seen = bytes(result.copy_to_host(stream=work))
    assert seen == data, f"the consumer read before the tensor's stream filled it: {{seen[:8]!r}}"

    # The consumer's work on the current work stream, still queued when it
    # releases the export, orders the release: the producer freed the
    # buffer on its own stream meanwhile.
    devmm.copy_host_to_ptr(bytes(64), result.ptr, stream=work)
    for _ in range(7):
        devmm.copy_device_to_ptr(source.ptr, scratch.ptr, 64, stream=work)
    devmm.copy_device_to_ptr(managed.contents.dl_tensor.data, result.ptr, 64, stream=work)
    t.buffer.free(stream=side)
    del t
    fake.fake_clear_calls()
    managed.contents.deleter(managed)
    size = fake.fake_call_log(None, 0)
    text = ctypes.create_string_buffer(size + 1)
    fake.fake_call_log(text, size + 1)
    log = text.value.decode().splitlines()
    free_at = next(i for i, line in enumerate(log) if "FreeAsync" in line)
    waits = [line for line in log[:free_at] if "StreamWaitEvent" in line]
    # The default stream is the one the protocol spells 1 on CUDA (the
    # legacy stream's own handle), 0 on ROCm.
    consumer = {{work.handle, 1}} if work.handle == 0 and "{device}" == "cuda" else {{work.handle}}
    assert any(
        f"stream={{side.handle:#x}} " in w and any(f"recorded_on={{c:#x}}" in w for c in consumer) for w in waits
    ), log
    seen = bytes(result.copy_to_host(stream=work))
    fake.fake_set_stream_delay(ctypes.c_uint64(0))
    side.synchronize()
    assert seen == data, f"the release overtook the consumer's read: {{seen[:8]!r}}"
    print("ok")
    """
)


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_an_exchange_export_orders_the_tensors_stream_before_the_current_work_stream(
    platform: str, fake_library: Callable[[str], str]
) -> None:
    """The C exchange API's consumer orders its work after the producer's
    current work stream (the device's default stream in devmm), not after
    the tensor's own: an export of a tensor whose stream still has work
    queued makes the current work stream wait for it first."""
    p = PLATFORMS[platform]
    _run(p, EXCHANGE_ORDERING.format(device=p["device"]), fake_library)


RELEASE_WITHOUT_THE_GIL = textwrap.dedent(
    """
    import ctypes, faulthandler, gc, importlib, sys, threading, time
    import devmm

    # A release that waits holding the GIL never lets the releaser run.
    faulthandler.dump_traceback_later(30, exit=True)
    fake = ctypes.CDLL(sys.argv[1])
    gpu = devmm.Device.from_string("{device}:0")
    rt = devmm.runtime_for(gpu)
    mrs = importlib.import_module("devmm.mrs.{module}")
    # The synchronous allocator: its free waits for all queued work.
    synchronous = mrs.{runtime}(gpu, async_alloc=False)
    stream = rt.create_stream(gpu)
    source = devmm.DeviceBuffer.to_device(bytes(64), device=gpu)
    made = {{
        "a DeviceBuffer": lambda: devmm.DeviceBuffer(64, mr=synchronous),
        "a Tensor": lambda: devmm.empty((64,), "uint8", mr=synchronous, layout=devmm.RowMajor()),
    }}
    free = b"{free}"

    def release(before):
        # Python code, so it runs only while the release lets the GIL go:
        # once the free has begun (and waits for the held copy).
        while fake.fake_call_count(free) == before:
            time.sleep(0.001)
        fake.fake_release_work()

    for name, make in made.items():
        obj = make()
        address = obj.ptr if isinstance(obj, devmm.DeviceBuffer) else obj.data_ptr
        # A copy into the memory, held until another thread lets it run.
        fake.fake_hold_work(1)
        devmm.copy_device_to_ptr(source.ptr, address, 64, stream=stream)
        fake.fake_hold_work(0)
        releaser = threading.Thread(target=release, args=(fake.fake_call_count(free),))
        releaser.start()
        del obj  # the last handle: its free waits for the held copy
        gc.collect()
        releaser.join()
        stream.synchronize()

    # A stream-ordered free waits too when the buffer's stream is another
    # thread's per-thread default stream: for the whole device, so for the
    # copy held on `stream` too.
    ordered = mrs.{runtime}(gpu, async_alloc=True)
    held = {{}}

    def make_elsewhere():
        held["buffer"] = devmm.DeviceBuffer(64, mr=ordered, stream=devmm.PER_THREAD_DEFAULT)

    maker = threading.Thread(target=make_elsewhere)
    maker.start()
    maker.join()
    assert ordered.stream_ordered
    target = devmm.DeviceBuffer(64, device=gpu)
    fake.fake_hold_work(1)
    devmm.copy_device_to_ptr(source.ptr, target.ptr, 64, stream=stream)
    fake.fake_hold_work(0)
    free = b"{device_synchronize}"
    releaser = threading.Thread(target=release, args=(fake.fake_call_count(free),))
    releaser.start()
    held.clear()  # the last handle, dropped on another thread than its stream's
    gc.collect()
    releaser.join()
    print("ok")
    """
)


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_a_dropped_handle_waits_for_the_device_without_the_gil(
    platform: str, fake_library: Callable[[str], str]
) -> None:
    """Dropping the last handle to GPU memory may wait for the device (a
    synchronous free, which waits for all queued work; a stream-ordered
    free of a buffer on another thread's per-thread stream, which waits for
    the whole device); it waits without the GIL, as an explicit `free()`
    does, so the thread that lets the work run (or a host callback the
    stream runs) is not shut out."""
    p = PLATFORMS[platform]
    cuda = platform == "cuda"
    script = RELEASE_WITHOUT_THE_GIL.format(
        device=p["device"],
        module="cuda" if cuda else "rocm",
        runtime="CudaRuntimeMemoryResource" if cuda else "HipRuntimeMemoryResource",
        free="cudaFree" if cuda else "hipFree",
        device_synchronize="cudaDeviceSynchronize" if cuda else "hipDeviceSynchronize",
    )
    _run(p, script, fake_library)
