"""Issue 29, defects 1 and 5, through the Python API over the fake drivers
(scripts/test-python.sh builds them and names them in DEVMM_TEST_FAKE_CUDART
and DEVMM_TEST_FAKE_HIP; a run without them fails, never skips).

Defect 1: a per-thread default stream (`devmm.PER_THREAD_DEFAULT`) stands for
the thread that made it; a DLPack hand-off or release on another thread is
ordered after that thread's work, not sent through the raw handle (which
names the calling thread's own stream). Defect 5: under stream capture
(CUDA graphs, HIP graphs), a hand-off into a capturing stream is correct and
keeps the capture, and `synchronize()` or a synchronous allocation on a
capturing stream raises `devmm.StreamError` naming the capture before the
driver call that would invalidate it."""

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable

import pytest

PER_THREAD = textwrap.dedent(
    """
    import ctypes, sys, threading
    import devmm
    from devmm import CopyKind

    fake = ctypes.CDLL(sys.argv[1])
    fake.fake_set_stream_delay.argtypes = [ctypes.c_uint64]
    gpu = devmm.Device.from_string("cuda:0")
    rt = devmm.runtime_for(gpu)
    legacy = rt.stream(gpu, devmm.LEGACY_DEFAULT)
    mr = devmm.get_current_memory_resource(gpu)
    data = bytes(range(1, 65))
    host = ctypes.create_string_buffer(data, 64)
    source, scratch = mr.allocate(64, legacy), mr.allocate(64, legacy)
    rt.memcpy(source, ctypes.addressof(host), 64, CopyKind.HOST_TO_DEVICE, legacy)
    # Each item of stream work now runs 40 ms late: what a thread queued has
    # not run when it hands its tensor or capsule over.
    fake.fake_set_stream_delay(40000)

    def late_copy(stream, dst, src):
        for _ in range(7):
            rt.memcpy(scratch, src, 64, CopyKind.DEVICE_TO_DEVICE, stream)
        rt.memcpy(dst, src, 64, CopyKind.DEVICE_TO_DEVICE, stream)

    def on_a_thread(work):
        out = {{}}
        thread = threading.Thread(target=lambda: out.update(value=work()))
        thread.start()
        thread.join()
        return out["value"]

    # A tensor on thread A's per-thread stream, exported on this thread: the
    # consumer reads what A's queued copy wrote.
    def produce():
        per_thread = rt.stream(gpu, devmm.PER_THREAD_DEFAULT)
        t = devmm.empty((64,), "uint8", device=gpu, stream=per_thread)
        late_copy(per_thread, t.data_ptr, source)
        return t

    t = on_a_thread(produce)
    consumer = rt.create_stream(gpu)
    result = devmm.DeviceBuffer(64, device=gpu, stream=consumer)
    capsule = t.__dlpack__(stream=consumer.handle, max_version=(1, 1))
    rt.memcpy(result.ptr, t.data_ptr, 64, CopyKind.DEVICE_TO_DEVICE, consumer)
    got = result.copy_to_host().tobytes()
    assert got == data, f"the consumer read stale bytes: {{got[:8]!r}}"
    del capsule, t

    # A capsule whose consumer is thread A's per-thread stream (stream=2),
    # released on this thread: freed only after A's queued read.
    producer = rt.create_stream(gpu)
    t = devmm.empty((64,), "uint8", device=gpu, stream=producer)
    rt.memcpy(t.data_ptr, source, 64, CopyKind.DEVICE_TO_DEVICE, producer)
    producer.synchronize()
    read = mr.allocate(64, legacy)

    def consume():
        capsule = t.__dlpack__(stream=2, max_version=(1, 1))
        late_copy(rt.stream(gpu, devmm.PER_THREAD_DEFAULT), read, t.data_ptr)
        return capsule

    capsule = on_a_thread(consume)
    t.buffer.free()
    del t
    del capsule  # the release, on another thread than its consumer's
    # The legacy stream waits for every blocking stream, per-thread ones included.
    legacy.synchronize()
    back = ctypes.create_string_buffer(64)
    rt.memcpy(ctypes.addressof(back), read, 64, CopyKind.DEVICE_TO_HOST, legacy)
    assert back.raw == data, f"the release overtook the consumer's read: {{back.raw[:8]!r}}"
    fake.fake_set_stream_delay(0)
    for ptr in (source, scratch, read):
        mr.deallocate(ptr, 64, legacy)
    print("ok")
    """
)

CAPTURE = textwrap.dedent(
    """
    import ctypes, sys
    import devmm
    import devmm.mrs.{module} as mrs

    fake = ctypes.CDLL(sys.argv[1])
    begin = fake.{prefix}StreamBeginCapture
    begin.argtypes = [ctypes.c_void_p, ctypes.c_int]
    end = fake.{prefix}StreamEndCapture
    end.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    destroy = fake.{prefix}GraphDestroy
    destroy.argtypes = [ctypes.c_void_p]

    def end_capture(stream):
        graph = ctypes.c_void_p()
        status = end(stream.handle, ctypes.byref(graph))
        if graph.value:
            assert destroy(graph) == 0
        return status

    gpu = devmm.Device.from_string("{device}:0")
    rt = devmm.runtime_for(gpu)
    producer, consumer = rt.create_stream(gpu), rt.create_stream(gpu)
    t = devmm.empty((64,), "uint8", device=gpu, stream=producer)
    before = devmm.DeviceBuffer(64, device=gpu, stream=consumer)
    assert begin(consumer.handle, 0) == 0  # a global-mode capture

    # A hand-off into the capturing stream: ordered, and the capture goes on.
    capsule = t.__dlpack__(stream=consumer.handle, max_version=(1, 1))

    def refused(what, call):
        try:
            call()
        except devmm.StreamError as err:
            assert "capturing a graph" in str(err), (what, err)
        else:
            raise AssertionError(what + " on a capturing stream was not refused")

    refused("synchronize", consumer.synchronize)
    # A graph's temporaries: allocated on the capturing stream (allocation
    # nodes) and freed within the capture (their free nodes), explicitly or
    # when dropped. Memory from before the capture is not the graph's.
    fake.fake_live_allocations.restype = ctypes.c_uint64
    live = fake.fake_live_allocations()
    temporary = devmm.DeviceBuffer(64, device=gpu, stream=consumer)
    temporary.free()
    assert temporary.closed
    devmm.DeviceBuffer(64, device=gpu, stream=consumer)  # dropped at once
    assert fake.fake_live_allocations() == live, "a temporary was not freed by its graph"
    refused("a free of memory from before the capture", before.free)
    assert not before.closed
    for mr in (mrs.{pinned_mr}(), mrs.{managed_mr}()):
        # The capturing stream, as a stream of the resource's device.
        on_device = rt.wrap_stream(mr.device, consumer.handle)
        refused(repr(mr), lambda: devmm.DeviceBuffer(64, mr=mr, stream=on_device))
    assert end_capture(consumer) == 0, "the capture was broken"
    del capsule
    before.free()
    consumer.synchronize()
    print("ok")
    """
)

PLATFORMS = {
    "cuda": dict(
        env="DEVMM_TEST_FAKE_CUDART", path_var="DEVMM_CUDART_PATH", module="cuda", prefix="cuda",
        device="cuda", pinned_mr="CudaPinnedMemoryResource", managed_mr="CudaManagedMemoryResource",
    ),
    "rocm": dict(
        env="DEVMM_TEST_FAKE_HIP", path_var="DEVMM_HIP_PATH", module="rocm", prefix="hip",
        device="rocm", pinned_mr="HipPinnedMemoryResource", managed_mr="HipManagedMemoryResource",
    ),
}


def run_over_the_fake(script: str, platform: str, fake_library: Callable[[str], str]) -> None:
    """Runs `script` in a fresh interpreter over the platform's fake library
    (its path is `sys.argv[1]` there); the script prints `ok`."""
    p = PLATFORMS[platform]
    library = fake_library(p["env"])
    env = dict(os.environ, **{p["path_var"]: library})
    env.pop("DEVMM_RUNTIME", None)
    done = subprocess.run(
        [sys.executable, "-c", script.format(**p), library], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_per_thread_streams_hand_off_and_release_across_threads_in_order(
    fake_library: Callable[[str], str],
) -> None:
    run_over_the_fake(PER_THREAD, "cuda", fake_library)


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_stream_capture_is_kept_or_refused_with_a_stream_error(
    platform: str, fake_library: Callable[[str], str]
) -> None:
    run_over_the_fake(CAPTURE, platform, fake_library)
