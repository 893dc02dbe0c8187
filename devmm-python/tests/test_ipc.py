"""Sharing a buffer with another process (issue 30): a buffer of a pool made
with ``enable_ipc=True`` exports an ``IpcDescriptor`` that a second, real
process started with ``multiprocessing``'s spawn method maps as a
``DeviceBuffer``; both read and write the same bytes. Over the fake CUDA
runtime and HIP libraries, whose IPC-capable pools keep their blocks in a
memfd the other process maps (tests/fake-driver/src/ipc.rs).
scripts/test-python.sh names the fakes in DEVMM_TEST_FAKE_CUDART /
DEVMM_TEST_FAKE_HIP; a run without them fails (conftest's ``fake_library``),
never skips. The script runs from a file so the spawned child can import its
functions; the child finds the fake through the environment it inherits."""

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


    def child(first, queue, conn):
        # A descriptor passed as a Process argument (spawn passes its fd).
        mapped = devmm.DeviceBuffer.from_ipc_descriptor(first)
        assert mapped.nbytes == 12 and str(mapped.device) == GPU, mapped
        conn.send(bytes(mapped.copy_to_host()))
        mapped.copy_from_host(b"CHILD")
        # The importer's free releases only its mapping.
        mapped.free()
        # One sent through a queue to a running process (the resource sharer).
        held = devmm.DeviceBuffer.from_ipc_descriptor(queue.get())
        conn.send(bytes(held.copy_to_host()))
        assert conn.recv() == "free yours"
        held.free()
        conn.send("freed")
        # Bad input: a file that is no pool's, and a closed descriptor.
        with open("/dev/null", "rb") as null:
            foreign = devmm.IpcDescriptor._from_parts(GPU, 16, os.dup(null.fileno()), bytes(64), 1)
        try:
            devmm.DeviceBuffer.from_ipc_descriptor(foreign)
            raise AssertionError("a foreign descriptor was imported")
        except ValueError as e:
            assert "cannot be imported" in str(e), e
        closed = queue.get()
        closed.close()
        try:
            devmm.DeviceBuffer.from_ipc_descriptor(closed)
            raise AssertionError("a closed descriptor was imported")
        except ValueError as e:
            assert "is closed" in str(e), e
        conn.send("done")


    if __name__ == "__main__":
        ctx = mp.get_context("spawn")
        mr = mrs.{pool_mr}(enable_ipc=True)
        assert repr(mr).endswith("enable_ipc=True)"), repr(mr)
        buf = devmm.DeviceBuffer.to_device(b"parent bytes", mr=mr)
        first = buf.ipc_descriptor()
        assert first.nbytes == 12 and first.exporter_pid == os.getpid(), first

        # Plain pickle cannot carry the file descriptor.
        try:
            pickle.dumps(first)
            raise AssertionError("plain pickle took a descriptor")
        except TypeError as e:
            assert "multiprocessing" in str(e), e
        # Its own process uses the buffer, not the descriptor.
        try:
            devmm.DeviceBuffer.from_ipc_descriptor(first)
            raise AssertionError("imported in its own process")
        except ValueError as e:
            assert "exported by this process" in str(e), e
        # A pool without IPC says how to make one.
        plain = devmm.DeviceBuffer(64, mr=mrs.{pool_mr}())
        try:
            plain.ipc_descriptor()
            raise AssertionError("a pool without IPC exported")
        except ValueError as e:
            assert "{pool_mr}(enable_ipc=True)" in str(e), e

        parent, end = ctx.Pipe()
        queue = ctx.Queue()
        process = ctx.Process(target=child, args=(first, queue, end), daemon=True)
        process.start()
        assert parent.recv() == b"parent bytes"
        second = devmm.DeviceBuffer.to_device(b"second", mr=mr)
        queue.put(second.ipc_descriptor())
        assert parent.recv() == b"second"
        # The child still maps `second`: the driver's rule is that importers
        # free first, and the fake refuses the exporter's free meanwhile.
        try:
            second.free()
            raise AssertionError("freed while another process maps it")
        except RuntimeError as e:
            assert "FreeAsync" in str(e) and "call free() again" in e.__notes__[0], e
        assert not second.closed
        parent.send("free yours")
        assert parent.recv() == "freed"
        second.free()
        queue.put(buf.ipc_descriptor())
        assert parent.recv() == "done"
        process.join(60)
        assert process.exitcode == 0, process.exitcode
        # The child's write is here, and its free left the memory alone.
        assert bytes(buf.copy_to_host()) == b"CHILDt bytes", bytes(buf.copy_to_host())
        buf.copy_from_host(b"still mine")
        assert bytes(buf.copy_to_host(nbytes=10)) == b"still mine"
        buf.free()
        print("ok")
    """
)

PLATFORMS = {
    "cuda": dict(
        env="DEVMM_TEST_FAKE_CUDART", path_var="DEVMM_CUDART_PATH", module="cuda", device="cuda",
        pool_mr="CudaAsyncMemoryResource",
    ),
    "rocm": dict(
        env="DEVMM_TEST_FAKE_HIP", path_var="DEVMM_HIP_PATH", module="rocm", device="rocm",
        pool_mr="HipAsyncMemoryResource",
    ),
}


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_a_buffer_shared_with_a_spawned_process(
    platform: str, fake_library: Callable[[str], str], tmp_path: Path
) -> None:
    p = PLATFORMS[platform]
    env = dict(os.environ, **{p["path_var"]: fake_library(p["env"])})
    script = tmp_path / "ipc_round_trip.py"
    script.write_text(SCRIPT.format(**p))
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


@pytest.mark.parametrize(
    "refused",
    [{"data": bytes(3)}, {"device": "nonsense:0"}, {"pci_bus_id": "0000:" + "f" * 40}],
    ids=["short export data", "unknown device", "overlong bus id"],
)
def test_a_refused_descriptor_closes_the_file_descriptor_it_was_given(refused: dict[str, object]) -> None:
    # Unpickling hands the received descriptor over; when its parts are
    # refused nothing else will ever close it.
    import devmm

    fd = os.open(os.devnull, os.O_RDONLY)
    parts: dict[str, object] = {"device": "cuda:0", "nbytes": 16, "fd": fd, "data": bytes(64), "pid": 1}
    with pytest.raises(ValueError):
        devmm.IpcDescriptor._from_parts(**(parts | refused))
    with pytest.raises(OSError):
        os.fstat(fd)


DEADLOCK_SCRIPT = textwrap.dedent(
    """
    import ctypes
    import os
    import threading
    import time

    import devmm

    fake = ctypes.CDLL({library!r})
    fake.fake_delayed_calls_sleeping.restype = ctypes.c_uint64
    with open(os.devnull, "rb") as null:
        # Another process's descriptor as far as this one can tell (pid 1);
        # the fake refuses to import the file, after the delay.
        descriptor = devmm.IpcDescriptor._from_parts("{device}:0", 16, os.dup(null.fileno()), bytes(64), 1)
    assert fake.fake_delay_next_call(b"{prefix}MemPoolImportFromShareableHandle", ctypes.c_uint64(2_000_000)) == 0
    refusals = []

    def importer():
        try:
            devmm.DeviceBuffer.from_ipc_descriptor(descriptor)
        except ValueError as e:
            refusals.append(e)

    thread = threading.Thread(target=importer)
    thread.start()
    while fake.fake_delayed_calls_sleeping() == 0:
        time.sleep(0.001)
    # The importer is inside the driver call, without the GIL; this thread
    # has it and reads the descriptor meanwhile.
    assert not descriptor.closed and descriptor.nbytes == 16, descriptor
    thread.join()
    assert len(refusals) == 1 and "cannot be imported" in str(refusals[0]), refusals
    print("ok")
    """
)


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_a_descriptor_read_while_another_thread_imports_it(
    platform: str, fake_library: Callable[[str], str], tmp_path: Path
) -> None:
    # The import releases the GIL for the driver's calls; had it kept the
    # descriptor's lock meanwhile, a thread that holds the GIL and reads the
    # descriptor would wait for the lock while the importer waits for the
    # GIL, for ever.
    p = PLATFORMS[platform]
    library = fake_library(p["env"])
    env = dict(os.environ, **{p["path_var"]: library})
    prefix = "cuda" if platform == "cuda" else "hip"
    script = DEADLOCK_SCRIPT.format(library=library, prefix=prefix, **p)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
