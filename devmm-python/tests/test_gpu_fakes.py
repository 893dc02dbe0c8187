"""The GPU resources and the driver paths (streams, DLPack hand-off,
conformance) against the repository's fake CUDA runtime and HIP libraries,
which serve host memory and record calls. scripts/test-python.sh builds
them and names them in DEVMM_TEST_FAKE_CUDART / DEVMM_TEST_FAKE_HIP; a
run without those fails (conftest's `fake_library`), never skips."""

import os
from collections.abc import Callable
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import numpy as np
    import devmm, devmm.testing
    import devmm.mrs.{module} as mrs

    assert "{runtime}" in devmm.runtime_names()
    gpu = devmm.Device.from_string("{device}:0")
    rt = devmm.runtime_for(gpu)
    assert rt is devmm.runtime_for("{runtime}") and rt.devices()[0] == gpu
    free, total = rt.memory_info(gpu)
    assert 0 < free <= total

    mr = mrs.{device_mr}()
    assert mr.device == gpu and mr.guaranteed_alignment() == 256

    # The runtime's default resources are the shipped classes that make
    # them, with the seed's repr, and the registry hands out one object.
    default = devmm.get_current_memory_resource(gpu)
    assert type(default) is mrs.{device_mr}, type(default)
    assert default is devmm.get_current_memory_resource(gpu)
    assert repr(default) == "{device_mr}(device={device}:0, async_alloc=True)", repr(default)
    host = devmm.Device(devmm.DeviceType.{host_type}, 0)
    assert type(rt.default_memory_resource(host)) is mrs.{pinned_mr}
    # Managed memory: its own device type on CUDA; ROCm has none, and its
    # device type's default is the runtime resource.
    managed = devmm.Device(devmm.DeviceType.{managed_type}, 0)
    assert type(rt.default_memory_resource(managed)) is mrs.{managed_default_mr}
    with devmm.DeviceBuffer(16, device=gpu) as on_default:
        assert on_default.mr is default
    stream = rt.create_stream(gpu)
    assert stream.device == gpu and stream.handle != 0
    stream.wait(rt.default_stream(gpu))
    stream.synchronize()
    {cuda_protocol}

    stats = devmm.StatisticsAdaptor(mr)
    t = devmm.empty((4, 3), "float32", layout=devmm.DeviceOptimal(), mr=stats, stream=stream)
    assert t.device == gpu and t.strides == (32, 1) and t.data_ptr % 256 == 0
    assert t.__dlpack_device__() == ({code}, 0)
    t.buffer.copy_from_host(b"devmm")
    assert t.buffer.copy_to_host(nbytes=5).tobytes() == b"devmm"
    capsule = t.__dlpack__(max_version=(1, 0), stream={consumer_stream})
    try:
        t.__dlpack__(dl_device=(1, 0))
    except BufferError:
        pass
    else:
        raise AssertionError("a cpu dl_device must be refused")
    t.buffer.free()
    assert stats.current_bytes > 0  # the capsule still holds the memory
    del capsule
    assert stats.current_bytes == 0

    with devmm.using_memory_resource(stats):
        devmm.empty((8,), "int32", device=gpu).buffer.free()
    assert stats.allocations == 2 and stats.current_bytes == 0

    pinned = mrs.{pinned_mr}()
    buf = devmm.DeviceBuffer(100, mr=pinned)
    assert buf.device.type is devmm.DeviceType.{host_type}
    buf.free()

    devmm.testing.mr_conformance(mrs.{device_mr})
    devmm.testing.mr_conformance(mrs.{pinned_mr})
    devmm.testing.dlpack_conformance(gpu)
    print("ok")
    """
)

PLATFORMS = {
    "cuda": dict(
        env="DEVMM_TEST_FAKE_CUDART", path_var="DEVMM_CUDART_PATH", module="cuda", runtime="cuda",
        device="cuda", code=2, consumer_stream=1, legacy_handle=1, device_mr="CudaRuntimeMemoryResource",
        pinned_mr="CudaPinnedMemoryResource", host_type="CUDA_HOST",
        managed_type="CUDA_MANAGED", managed_default_mr="CudaManagedMemoryResource",
        # The CUDA stream protocol as cuda.core and CuPy read it: (version 0, handle).
        cuda_protocol="assert stream.__cuda_stream__() == (0, stream.handle) and stream.handle != 0",
    ),
    "rocm": dict(
        env="DEVMM_TEST_FAKE_HIP", path_var="DEVMM_HIP_PATH", module="rocm", runtime="rocm",
        device="rocm", code=10, consumer_stream=0, legacy_handle=0, device_mr="HipRuntimeMemoryResource",
        pinned_mr="HipPinnedMemoryResource", host_type="ROCM_HOST",
        managed_type="ROCM", managed_default_mr="HipRuntimeMemoryResource",
        cuda_protocol=(
            "try:\n    stream.__cuda_stream__()\nexcept AttributeError:\n    pass\n"
            "else:\n    raise AssertionError('a HIP stream must not claim the CUDA protocol')"
        ),
    ),
}


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_gpu_paths_against_the_fake_driver(platform: str, fake_library: Callable[[str], str]) -> None:
    p = PLATFORMS[platform]
    library = fake_library(str(p["env"]))
    env = dict(os.environ, **{str(p["path_var"]): library})
    script = SCRIPT.format(**p)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


@pytest.mark.parametrize(
    ("selected", "expected"),
    [("cuda", "cuda:0 cpu,cuda"), ("cpu", "cpu:0 cpu")],
)
def test_devmm_runtime_selects_the_default_device(
    selected: str, expected: str, fake_library: Callable[[str], str]
) -> None:
    library = fake_library("DEVMM_TEST_FAKE_CUDART")
    env = dict(os.environ, DEVMM_CUDART_PATH=library, DEVMM_RUNTIME=selected)
    script = (
        "import devmm; t = devmm.empty((2,), 'float32'); "
        "print(devmm.default_device(), ','.join(devmm.runtime_names())); "
        "assert t.device == devmm.default_device()"
    )
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == expected


def test_the_default_device_follows_devmm_runtime_as_discovery_last_read_it(fake_library: Callable[[str], str]) -> None:
    env = dict(os.environ, DEVMM_CUDART_PATH=fake_library("DEVMM_TEST_FAKE_CUDART"))
    env.pop("DEVMM_RUNTIME", None)
    script = textwrap.dedent(
        """
        import os
        import devmm
        assert devmm.default_device() == devmm.Device.from_string("cpu")
        os.environ["DEVMM_RUNTIME"] = "cuda"
        assert devmm.runtime_names() == ("cpu", "cuda")
        assert devmm.empty((2,), "float32").device == devmm.Device.from_string("cuda:0")
        os.environ["DEVMM_RUNTIME"] = "cpu"
        assert devmm.runtime_names() == ("cpu",) and devmm.default_device().type is devmm.DeviceType.CPU
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_a_failed_hand_off_is_a_stream_error(fake_library: Callable[[str], str]) -> None:
    """The seed's exception for hand-off failures: a failing event call in
    `wait`, `wait_raw`, `make_stream_wait` or a DLPack `stream=` exchange
    raises `StreamError` (a `RuntimeError`) naming the driver call."""
    library = fake_library("DEVMM_TEST_FAKE_CUDART")
    env = dict(os.environ, DEVMM_CUDART_PATH=library)
    script = textwrap.dedent(
        f"""
        import ctypes
        import devmm
        from devmm._core.stream import StreamError
        fake = ctypes.CDLL({library!r})
        fake.fake_fail_next.argtypes = [ctypes.c_char_p, ctypes.c_int]
        assert devmm.StreamError is StreamError and issubclass(StreamError, RuntimeError)
        rt = devmm.runtime_for("cuda")
        consumer, producer = rt.create_stream("cuda:0"), rt.create_stream("cuda:0")
        t = devmm.empty((4,), "float32", device="cuda:0", stream=producer)
        calls = [
            ("cudaEventRecord", lambda: consumer.wait_raw(producer.handle)),
            ("cudaStreamWaitEvent", lambda: rt.make_stream_wait(consumer.handle, producer)),
            ("cudaEventRecord", lambda: consumer.wait(producer)),
            ("cudaEventRecord", lambda: t.__dlpack__(stream=consumer.handle, max_version=(1, 1))),
        ]
        for call, hand_off in calls:
            assert fake.fake_fail_next(call.encode(), 700) == 0
            try:
                hand_off()
            except StreamError as err:
                assert str(err).startswith("stream hand-off failed: " + call + " failed on cuda:0"), err
            else:
                raise AssertionError(call + " did not fail")
        consumer.wait_raw(producer.handle)
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_a_library_without_a_driver_leaves_devmm_working(fake_library: Callable[[str], str]) -> None:
    """A CI container: the CUDA runtime library loads but no driver answers
    (every call fails with cudaErrorInsufficientDriver)."""
    library = fake_library("DEVMM_TEST_FAKE_CUDART")
    env = dict(os.environ, DEVMM_CUDART_PATH=library, FAKE_DRIVER_NO_DRIVER="1")
    env.pop("DEVMM_RUNTIME", None)
    script = textwrap.dedent(
        """
        import devmm
        import devmm.mrs.cuda
        names = devmm.runtime_names()
        assert "cpu" in names, names
        try:
            devmm.runtime_for("cuda")
        except devmm.RuntimeUnavailableError as e:
            assert "cudaErrorInsufficientDriver (35)" in str(e), str(e)
        else:
            raise AssertionError("a runtime without a driver loaded")
        try:
            devmm.mrs.cuda.CudaRuntimeMemoryResource()
        except devmm.RuntimeUnavailableError as e:
            assert "no usable driver" in str(e), str(e)
        else:
            raise AssertionError("a resource without a driver was made")
        t = devmm.empty((2,), "float32")
        assert t.device == devmm.Device.from_string("cpu")
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


PYTHON_STREAM = textwrap.dedent(
    """
    import devmm
    import devmm.mrs.cuda as mrs

    gpu = devmm.Device.from_string("cuda:0")
    rt = devmm.runtime_for(gpu)
    native = rt.create_stream(gpu)
    legacy = rt.stream(gpu, devmm.LEGACY_DEFAULT)

    class Wrapped(devmm.Stream):
        # A Python stream over a CUDA stream made elsewhere, as a framework's is.
        def __init__(self, inner):
            self.device = inner.device
            self.inner = inner
            self.calls = []

        @property
        def handle(self):
            return self.inner.handle

        def synchronize(self):
            self.calls.append("synchronize")
            self.inner.synchronize()

        def wait_raw(self, other_handle):
            self.calls.append(("wait_raw", other_handle))
            self.inner.wait_raw(other_handle)

    s = Wrapped(native)
    assert s.__cuda_stream__() == (0, native.handle) and not s.is_default()
    t = devmm.empty((4,), "uint8", layout=devmm.RowMajor(), mr=mrs.CudaRuntimeMemoryResource(), stream=s)
    assert t.buffer.stream.handle == native.handle
    # Not a default stream: the copy is queued on the handle, nothing waits.
    t.buffer.copy_from_host(b"abcd", stream=s)
    assert s.calls == []
    s.wait(legacy)
    assert s.calls == [("wait_raw", legacy.handle)]
    assert t.buffer.copy_to_host(stream=s).tobytes() == b"abcd"
    # A consumer on the legacy default stream is ordered after the handle.
    capsule = t.__dlpack__(max_version=(1, 0), stream=1)
    del capsule
    t.buffer.free()

    class Failing(Wrapped):
        def wait_raw(self, other_handle):
            raise LookupError("no event")

    try:
        Failing(native).wait(legacy)
    except LookupError as err:
        assert str(err) == "no event"
    else:
        raise AssertionError("the exception was lost")
    print("ok")
    """
)


def test_a_python_stream_over_a_cuda_stream(fake_library: Callable[[str], str]) -> None:
    library = fake_library("DEVMM_TEST_FAKE_CUDART")
    env = dict(os.environ, DEVMM_CUDART_PATH=library)
    env.pop("DEVMM_RUNTIME", None)
    done = subprocess.run([sys.executable, "-c", PYTHON_STREAM], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


HIP_WRAP_STREAM = textwrap.dedent(
    """
    import devmm

    gpu = devmm.Device.from_string("rocm:0")
    rt = devmm.runtime_for(gpu)
    native = rt.create_stream(gpu)

    class CudaStream:
        # An object of the CUDA stream protocol, as cuda.core's or CuPy's.
        def __cuda_stream__(self):
            return (0, native.handle)

    try:
        rt.wrap_stream(gpu, CudaStream())
    except TypeError as err:
        assert "__cuda_stream__ names a CUDA stream, and rocm:0 is a ROCm device" in str(err), str(err)
    else:
        raise AssertionError("a CUDA stream was adopted as a HIP stream")
    assert rt.wrap_stream(gpu, native.handle).handle == native.handle
    print("ok")
    """
)


def test_a_hip_runtime_refuses_a_cuda_stream_protocol_object(fake_library: Callable[[str], str]) -> None:
    env = dict(os.environ, DEVMM_HIP_PATH=fake_library("DEVMM_TEST_FAKE_HIP"))
    env.pop("DEVMM_RUNTIME", None)
    done = subprocess.run([sys.executable, "-c", HIP_WRAP_STREAM], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


ASYNC_ALLOC = textwrap.dedent(
    """
    import sys
    import devmm.mrs.{module} as mrs

    Runtime = mrs.{device_mr}
    pools = sys.argv[1] == "pools"
    assert Runtime(async_alloc=False).stream_ordered is False
    assert Runtime().stream_ordered is pools
    assert Runtime(async_alloc="auto").stream_ordered is pools
    try:
        forced = Runtime(async_alloc=True)
    except ValueError as e:
        assert not pools and "async_alloc=True" in str(e), str(e)
    else:
        assert pools and forced.stream_ordered is True
    for bad in ("yes", 1, None):
        try:
            Runtime(async_alloc=bad)
        except ValueError as e:
            assert "async_alloc must be 'auto', True or False" in str(e), str(e)
        else:
            raise AssertionError(f"async_alloc={{bad!r}} was taken")
    print("ok")
    """
)


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
@pytest.mark.parametrize("pools", ["pools", "no-pools"])
def test_async_alloc_picks_the_allocator_as_the_seed_s(
    platform: str, pools: str, fake_library: Callable[[str], str]
) -> None:
    p = PLATFORMS[platform]
    env = dict(os.environ, **{str(p["path_var"]): fake_library(str(p["env"]))})
    env.pop("DEVMM_RUNTIME", None)
    if pools == "no-pools":
        env["FAKE_DRIVER_NO_POOLS"] = "1"
    script = ASYNC_ALLOC.format(**p)
    done = subprocess.run([sys.executable, "-c", script, pools], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


STREAM_FLAGS = textwrap.dedent(
    """
    import ctypes, sys
    import devmm

    fake = ctypes.CDLL(sys.argv[1])
    fake.fake_call_log.restype = ctypes.c_size_t
    fake.fake_call_log.argtypes = [ctypes.c_char_p, ctypes.c_size_t]

    def creations():
        buf = ctypes.create_string_buffer(1 << 20)
        fake.fake_call_log(buf, len(buf))
        # Lines read `cudaStreamCreateWithFlags flags=N device=D stream=S -> status`.
        return [l.split()[1] for l in buf.value.decode().splitlines() if l.startswith("cudaStreamCreate")]

    for flags, expected in ((devmm.StreamFlags.NON_BLOCKING, 1), (devmm.StreamFlags.SYNC_DEFAULT, 0)):
        fake.fake_clear_calls()
        pool = devmm.StreamPool(2, flags, device="cuda:0")
        made = creations()
        assert made == [f"flags={{expected}}"] * 2, made
    print("ok")
    """
)


def test_a_stream_pool_creates_its_streams_with_its_flags(fake_library: Callable[[str], str]) -> None:
    library = fake_library("DEVMM_TEST_FAKE_CUDART")
    env = dict(os.environ, DEVMM_CUDART_PATH=library)
    env.pop("DEVMM_RUNTIME", None)
    done = subprocess.run(
        [sys.executable, "-c", STREAM_FLAGS.format(), library], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


MEMCPY = textwrap.dedent(
    """
    import ctypes, sys
    import pytest
    import devmm
    from devmm import CopyKind

    fake = ctypes.CDLL(sys.argv[1])
    gpu = devmm.Device.from_string("{device}:1")
    rt = devmm.runtime_for(gpu)
    stream = rt.create_stream(gpu)
    mr = devmm.get_current_memory_resource(gpu)
    a, b = mr.allocate(64, stream), mr.allocate(64, stream)
    src = ctypes.create_string_buffer(bytes(range(64)), 64)
    back, again = ctypes.create_string_buffer(64), ctypes.create_string_buffer(64)
    address = ctypes.addressof
    rt.memcpy(a, address(src), 64, CopyKind.HOST_TO_DEVICE, stream)
    rt.memcpy(b, a, 64, CopyKind.DEVICE_TO_DEVICE, stream)
    rt.memcpy(address(back), b, 64, CopyKind.DEVICE_TO_HOST, stream)
    rt.memcpy(address(again), a, 64, CopyKind.DEFAULT, stream)
    assert back.raw == again.raw == src.raw
    # A kind that does not match the memory is the driver's error.
    with pytest.raises(RuntimeError, match="MemcpyAsync failed on {device}:1 with .*InvalidValue"):
        rt.memcpy(address(back), address(src), 64, CopyKind.HOST_TO_DEVICE, stream)
    with pytest.raises(ValueError, match="does not serve cpu:0"):
        rt.memcpy(a, address(src), 64, CopyKind.HOST_TO_DEVICE, devmm.runtime_for("cpu").default_stream("cpu"))
    with pytest.raises(ValueError, match="dst null"):
        rt.memcpy(0, a, 64, CopyKind.DEVICE_TO_DEVICE, stream)
    mr.deallocate(a, 64, stream)
    mr.deallocate(b, 64, stream)
    # A sentinel names the platform's own handle.
    for sentinel in (devmm.DEFAULT, devmm.LEGACY_DEFAULT, devmm.PER_THREAD_DEFAULT):
        assert rt.wrap_stream(gpu, sentinel).handle == rt.stream(gpu, sentinel).handle
    assert rt.wrap_stream(gpu, devmm.LEGACY_DEFAULT).handle == {legacy_handle}
    # The hand-off: any stream of the device may wait on another.
    other = rt.create_stream(gpu)
    assert rt.make_stream_wait(other.handle, stream) is None
    print("ok")
    """
)


def run_over_the_fake(script: str, platform: str, fake_library: Callable[[str], str]) -> None:
    """Runs `script`, formatted for `platform`, in a fresh interpreter over
    the platform's fake library (its path is `sys.argv[1]` there); the script
    prints `ok`."""
    p = PLATFORMS[platform]
    library = fake_library(str(p["env"]))
    env = dict(os.environ, **{str(p["path_var"]): library})
    env.pop("DEVMM_RUNTIME", None)
    done = subprocess.run(
        [sys.executable, "-c", script.format(**p), library], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_the_seed_s_memcpy_against_the_fake_driver(platform: str, fake_library: Callable[[str], str]) -> None:
    run_over_the_fake(MEMCPY, platform, fake_library)


WITH_DEVICE = textwrap.dedent(
    """
    import ctypes, sys
    import devmm

    driver = ctypes.CDLL(sys.argv[1])
    get_device = getattr(driver, "cudaGetDevice" if "{device}" == "cuda" else "hipGetDevice")

    def active() -> int:
        ordinal = ctypes.c_int(-1)
        assert get_device(ctypes.byref(ordinal)) == 0
        return ordinal.value

    first, second = (devmm.Device.from_string(f"{device}:{{i}}") for i in (0, 1))
    # Both devices in use, so each has its primary context to go back to
    # (the runtime restores none it would have to create).
    devmm.DeviceBuffer(16, device=first).free()
    devmm.DeviceBuffer(16, device=second).free()
    # Each allocation gave back the device active before it.
    assert active() == 0
    with second:
        assert active() == 1
        with first as entered:
            assert entered is first and active() == 0
            with second:
                assert active() == 1
            assert active() == 0
        assert active() == 1
    assert active() == 0
    with second:
        try:
            with first:
                raise KeyError("inside")
        except KeyError:
            assert active() == 1
        else:
            raise AssertionError("the block's exception must propagate")
    assert active() == 0
    # Left out of order (as blocks held across await or yield are): the
    # block ends then, giving back what it found, and says so.
    first.__enter__()
    second.__enter__()
    try:
        first.__exit__(None, None, None)
    except RuntimeError as e:
        assert "while `with {device}:1:` is the innermost" in str(e) and "await or yield" in str(e), e
    else:
        raise AssertionError("an out-of-order exit must be refused")
    second.__exit__(None, None, None)
    try:
        second.__exit__(None, None, None)
    except RuntimeError as e:
        assert "did not enter" in str(e), e
    else:
        raise AssertionError("every block has ended")
    print("ok")
    """
)


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_with_device_sets_the_native_active_device_and_restores_it(platform: str, fake_library: Callable[[str], str]) -> None:
    run_over_the_fake(WITH_DEVICE, platform, fake_library)


NO_UNIFIED_ADDRESSING = textwrap.dedent(
    """
    import ctypes, sys
    import devmm

    fake = ctypes.CDLL(sys.argv[1])
    assert fake.fake_set_unified_addressing(0, 0) == 0
    gpu = devmm.Device.from_string("{device}:0")
    rt = devmm.runtime_for(gpu)
    stream = rt.default_stream(gpu)
    host = ctypes.create_string_buffer(8)
    try:
        rt.memcpy(ctypes.addressof(host), ctypes.addressof(host), 8, devmm.CopyKind.DEFAULT, stream)
    except ValueError as e:
        assert "has no unified addressing" in str(e), str(e)
    else:
        raise AssertionError("CopyKind.DEFAULT needs unified addressing")
    print("ok")
    """
)


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_copy_kind_default_needs_unified_addressing(platform: str, fake_library: Callable[[str], str]) -> None:
    run_over_the_fake(NO_UNIFIED_ADDRESSING, platform, fake_library)


def test_a_driver_out_of_memory_is_an_out_of_memory_error_that_a_callback_can_recover(
    fake_library: Callable[[str], str],
) -> None:
    """cudaMallocAsync's cudaErrorMemoryAllocation (injected, then from the
    fake's memory limit) is a devmm.OutOfMemoryError naming cuda:0, the size
    and the chain; the hooks see it once; a FailureCallbackAdaptor's retry
    succeeds once the callback freed memory."""
    library = fake_library("DEVMM_TEST_FAKE_CUDART")
    env = dict(os.environ, DEVMM_CUDART_PATH=library)
    script = textwrap.dedent(
        f"""
        import ctypes
        import devmm
        from devmm.mrs.cuda import CudaRuntimeMemoryResource
        fake = ctypes.CDLL({library!r})
        fake.fake_fail_next.argtypes = [ctypes.c_char_p, ctypes.c_int]
        fake.fake_call_count.argtypes = [ctypes.c_char_p]
        fake.fake_call_count.restype = ctypes.c_uint64
        gpu = devmm.Device.from_string("cuda:0")
        mr = CudaRuntimeMemoryResource(gpu)
        seen = []
        hook = devmm.on_out_of_memory(seen.append)

        assert fake.fake_fail_next(b"cudaMallocAsync", 2) == 0
        try:
            devmm.DeviceBuffer(64, mr=mr)
        except devmm.OutOfMemoryError as err:
            assert err.device == gpu and err.nbytes == 64, (err.device, err.nbytes)
            assert err.chain.startswith("CudaRuntimeMemoryResource(device=cuda:0"), err.chain
            assert (err.pool, err.largest_fit) == (None, None)
            assert "cudaMallocAsync" in str(err) and "cudaErrorMemoryAllocation" in str(err), str(err)
        else:
            raise AssertionError("the injected failure did not fail")
        assert [type(e).__name__ for e in seen] == ["OutOfMemoryError"] and seen[0].nbytes == 64

        # The fake's memory limit: 1 MiB, half of it held by a cache.
        assert fake.fake_set_memory_limit(0, 1 << 20) == 0
        cache = [devmm.DeviceBuffer(1 << 19, mr=mr)]
        calls = []
        def drop_cache(nbytes, attempt):
            calls.append((nbytes, attempt))
            if not cache:
                return False
            cache.pop().free()
            devmm.runtime_for(gpu).default_stream(gpu).synchronize()
            return True
        recovering = devmm.FailureCallbackAdaptor(mr, drop_cache)
        before = fake.fake_call_count(b"cudaMallocAsync")
        big = devmm.DeviceBuffer(3 << 18, mr=recovering)
        assert calls == [(3 << 18, 1)], calls
        assert fake.fake_call_count(b"cudaMallocAsync") - before == 2
        assert len(seen) == 1, "a recovered failure runs no hook"
        try:
            devmm.DeviceBuffer(1 << 19, mr=recovering)
        except devmm.OutOfMemoryError as err:
            assert err.device == gpu and err.chain.startswith("FailureCallbackAdaptor -> CudaRuntimeMemoryResource"), err.chain
        else:
            raise AssertionError("past the limit with nothing to free")
        assert calls[-1] == (1 << 19, 1) and len(seen) == 2
        big.free()
        hook.remove()
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


PINNED_SCRIPT = textwrap.dedent(
    """
    import ctypes
    import devmm
    import devmm.mrs.{module} as mrs
    from devmm._devmm import wait_for_allocation

    # The fake reports this runtime version from now on (before devmm loads it).
    fake = ctypes.CDLL({library!r})
    fake.fake_set_version({version}, {version})
    pinned = mrs.{pinned_mr}()
    print(pinned.uses_host_pool, pinned.stream_ordered)
    buf = devmm.DeviceBuffer(100, mr=pinned)
    buf.stream.synchronize()
    # Pinned memory is host memory: the host writes and reads it.
    ctypes.memmove(buf.ptr, b"x" * 100, 100)
    assert ctypes.string_at(buf.ptr, 100) == b"x" * 100
    stream = buf.stream
    buf.free()
    stream.synchronize()
    if pinned.uses_host_pool:
        # NumPy writes a block as soon as its allocator returns it: over a
        # stream-ordered pool, the allocation waits for its stream first
        # (the block may be one freed on it that queued work still reads).
        import numpy as np
        import devmm.integrations.numpy
        synchronized = fake.fake_call_count(b"cudaStreamSynchronize")
        with devmm.integrations.numpy.install(pinned):
            arr = np.empty(64, np.uint8)
        assert fake.fake_call_count(b"cudaStreamSynchronize") > synchronized, "NumPy got the block unordered"
        del arr
        # The same rule, the core's, for a buffer the host writes at once
        # (the Numba bridge's pinned arrays).
        fresh = devmm.DeviceBuffer(64, mr=pinned)
        synchronized = fake.fake_call_count(b"cudaStreamSynchronize")
        wait_for_allocation(fresh)
        assert fake.fake_call_count(b"cudaStreamSynchronize") == synchronized + 1, "the buffer was not waited for"
        fresh.free()
        stream.synchronize()
        # The freed block stays pinned across the synchronize, until trimmed.
        kept = pinned.pool_statistics()
        assert kept.reserved_bytes >= 100 and kept.used_bytes == 0, kept
        assert kept.used_high_bytes >= 100, kept
        pinned.reset_pool_high_water()
        assert pinned.pool_statistics().used_high_bytes == 0, pinned.pool_statistics()
        pinned.trim(0)
        assert pinned.pool_statistics().reserved_bytes == 0, pinned.pool_statistics()
    else:
        # Both platforms' pinned resources have the pool methods; without a
        # host pool there are no figures, and nothing to reset or trim.
        try:
            pinned.pool_statistics()
            raise AssertionError("memory pinned synchronously has no pool figures")
        except ValueError as e:
            assert "has no pool of its own" in str(e), e
        prefix = b"cuda" if "{module}" == "cuda" else b"hip"
        # Blocks no queued work touches: nothing to wait for.
        fresh = devmm.DeviceBuffer(64, mr=pinned)
        synchronized = fake.fake_call_count(prefix + b"StreamSynchronize")
        wait_for_allocation(fresh)
        assert fake.fake_call_count(prefix + b"StreamSynchronize") == synchronized, "waited without a stream-ordered pool"
        fresh.free()
        pool_calls = [prefix + b"MemPoolTrimTo", prefix + b"MemPoolSetAttribute"]
        before = [fake.fake_call_count(name) for name in pool_calls]
        pinned.reset_pool_high_water()
        pinned.trim(0)
        assert [fake.fake_call_count(name) for name in pool_calls] == before
    """
)


@pytest.mark.parametrize(
    ("platform", "version", "host_pool"),
    [("cuda", 12010, False), ("cuda", 12020, True), ("cuda", 13000, True), ("rocm", 60_241_133, False)],
)
def test_pinned_memory_comes_from_a_host_pool_where_the_runtime_has_one(
    platform: str, version: int, host_pool: bool, fake_library: Callable[[str], str]
) -> None:
    """CUDA 12.2 on has pools of pinned host memory; older CUDA and HIP pin
    with the synchronous allocator. Either way the host writes the memory."""
    p = PLATFORMS[platform]
    library = fake_library(str(p["env"]))
    env = dict(os.environ, **{str(p["path_var"]): library})
    script = PINNED_SCRIPT.format(library=library, version=version, **p)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{host_pool} {host_pool}"
