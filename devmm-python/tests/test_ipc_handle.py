"""Sharing ``cudaMalloc`` memory with another process through the legacy
IPC handle (issue 30): a buffer of ``CudaRuntimeMemoryResource(...,
async_alloc=False)`` gives an ``IpcMemHandle`` (``cudaIpcGetMemHandle``)
that a second, real process started with ``multiprocessing``'s spawn method
opens as a ``DeviceBuffer`` (``cudaIpcOpenMemHandle``); both read and write
the same bytes, and the opener's free (``cudaIpcCloseMemHandle``) leaves the
exporter's memory alone. Over the fake CUDA runtime and HIP libraries, whose
``*Malloc`` blocks live in a memfd the other process maps
(tests/fake-driver/src/ipc.rs); a run without them fails (conftest's
``fake_library``), never skips."""

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent(
    """
    import os
    import pickle
    import multiprocessing as mp

    import devmm
    import devmm.mrs.{module} as mrs

    GPU = "{device}:0"


    def child(handle, conn):
        opened = devmm.DeviceBuffer.from_ipc_handle(handle)
        assert opened.nbytes == 12 and str(opened.device) == GPU, opened
        conn.send(bytes(opened.copy_to_host()))
        opened.copy_from_host(b"CHILD")
        # The opener's free closes only its mapping.
        opened.free()
        # A handle whose bytes name nothing is a ValueError.
        forged = devmm.IpcMemHandle._from_parts(GPU, 12, bytes(64), handle.exporter_pid)
        try:
            devmm.DeviceBuffer.from_ipc_handle(forged)
            raise AssertionError("a forged handle was opened")
        except ValueError as e:
            assert "cannot be opened" in str(e), e
        conn.send("done")


    if __name__ == "__main__":
        ctx = mp.get_context("spawn")
        mr = mrs.{device_mr}(GPU, async_alloc=False)
        buf = devmm.DeviceBuffer.to_device(b"parent bytes", mr=mr)
        handle = buf.ipc_handle()
        assert handle.nbytes == 12 and handle.exporter_pid == os.getpid(), handle
        assert str(handle.device) == GPU and len(handle.handle) == 64, handle
        # Plain data: plain pickle carries it.
        assert pickle.loads(pickle.dumps(handle)) == handle
        # Its own process uses the buffer, not the handle.
        try:
            devmm.DeviceBuffer.from_ipc_handle(handle)
            raise AssertionError("opened in its own process")
        except ValueError as e:
            assert "exported by this process" in str(e), e
        # Stream-ordered memory has no legacy handle; the refusal says what has.
        ordered = devmm.DeviceBuffer(64, mr=mrs.{device_mr}(GPU))
        try:
            ordered.ipc_handle()
            raise AssertionError("stream-ordered memory gave a handle")
        except ValueError as e:
            assert "async_alloc=False" in str(e), e

        parent, end = ctx.Pipe()
        process = ctx.Process(target=child, args=(handle, end), daemon=True)
        process.start()
        assert parent.recv() == b"parent bytes"
        assert parent.recv() == "done"
        process.join(60)
        assert process.exitcode == 0, process.exitcode
        # The child's write is here, and its close left the memory alone.
        assert bytes(buf.copy_to_host()) == b"CHILDt bytes", bytes(buf.copy_to_host())
        buf.free()
        ordered.free()
        print("ok")
    """
)

PLATFORMS = {
    "cuda": dict(
        env="DEVMM_TEST_FAKE_CUDART", path_var="DEVMM_CUDART_PATH", module="cuda", device="cuda",
        device_mr="CudaRuntimeMemoryResource",
    ),
    "rocm": dict(
        env="DEVMM_TEST_FAKE_HIP", path_var="DEVMM_HIP_PATH", module="rocm", device="rocm",
        device_mr="HipRuntimeMemoryResource",
    ),
}


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_malloc_memory_shared_with_a_spawned_process_through_its_handle(
    platform: str, fake_library: Callable[[str], str], tmp_path: Path
) -> None:
    p = PLATFORMS[platform]
    env = dict(os.environ, **{p["path_var"]: fake_library(p["env"])})
    script = tmp_path / "ipc_handle_round_trip.py"
    script.write_text(SCRIPT.format(**p))
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


VISIBLE_SCRIPT = textwrap.dedent(
    """
    import os
    import pickle
    import multiprocessing as mp

    import devmm
    import devmm.mrs.{module} as mrs


    def child(descriptor, handle, conn):
        # This process sees only the exporter's GPU 1, as its device 0.
        for shared in (descriptor, handle):
            assert str(shared.device) == "{device}:1", shared
        mapped = devmm.DeviceBuffer.from_ipc_descriptor(descriptor)
        opened = devmm.DeviceBuffer.from_ipc_handle(handle)
        conn.send([(str(b.device), bytes(b.copy_to_host())) for b in (mapped, opened)])
        mapped.free()
        opened.free()


    if __name__ == "__main__":
        ctx = mp.get_context("spawn")
        gpu = "{device}:1"
        pooled = devmm.DeviceBuffer.to_device(b"on the GPU 1", mr=mrs.{pool_mr}(gpu, enable_ipc=True))
        malloced = devmm.DeviceBuffer.to_device(b"on the GPU 1", mr=mrs.{device_mr}(gpu, async_alloc=False))
        descriptor, handle = pooled.ipc_descriptor(), malloced.ipc_handle()
        # The fake names the machine's GPU n "0000:{{0x10 + n:02x}}:00.0".
        bus = "0000:11:00.0"
        assert descriptor.pci_bus_id == handle.pci_bus_id == bus, (descriptor.pci_bus_id, bus)
        # The bus id travels with the handle's plain pickle.
        assert pickle.loads(pickle.dumps(handle)).pci_bus_id == bus
        os.environ["FAKE_DRIVER_VISIBLE_DEVICES"] = "1"
        parent, end = ctx.Pipe()
        process = ctx.Process(target=child, args=(descriptor, handle, end), daemon=True)
        process.start()
        end.close()  # a child that fails ends the pipe: recv raises instead of waiting
        seen = parent.recv()
        process.join(60)
        assert process.exitcode == 0, process.exitcode
        assert seen == [("{device}:0", b"on the GPU 1")] * 2, seen
        pooled.free()
        malloced.free()
        print("ok")
    """
)


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_a_process_that_numbers_the_gpus_another_way_maps_the_exporters_gpu(
    platform: str, fake_library: Callable[[str], str], tmp_path: Path
) -> None:
    """A child that sees only the exporter's GPU 1 (``CUDA_VISIBLE_DEVICES=1``;
    the fake's ``FAKE_DRIVER_VISIBLE_DEVICES``) numbers it 0: the descriptor and
    the handle name the GPU by its PCI bus id, and the child maps the memory
    there, on that device's default stream."""
    p = PLATFORMS[platform]
    env = dict(os.environ, **{p["path_var"]: fake_library(p["env"])})
    script = tmp_path / "ipc_visible_devices.py"
    pool_mr = "CudaAsyncMemoryResource" if platform == "cuda" else "HipAsyncMemoryResource"
    script.write_text(VISIBLE_SCRIPT.format(pool_mr=pool_mr, **p))
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
