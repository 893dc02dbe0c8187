"""fork() after a GPU runtime started (issue 29, defect 4), over the fake
CUDA runtime and HIP libraries: the runtime belongs to the process that
started it (the fakes answer a forked child's calls with the initialisation
error, as the reference has it). devmm's first GPU call in such a child
raises a RuntimeError that says the process was forked after the runtime
started and to use the `spawn` start method; the child never frees or
touches the parent's device memory (no driver call at all); CPU memory
works there; and the parent goes on as before."""

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable

import pytest

SCRIPT = textwrap.dedent(
    """
    import ctypes
    import gc
    import os

    import devmm

    fake = ctypes.CDLL({library!r})
    fake.fake_call_log.restype = ctypes.c_size_t
    fake.fake_call_log.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    fake.fake_live_allocations.restype = ctypes.c_uint64

    def calls():
        size = fake.fake_call_log(None, 0)
        buf = ctypes.create_string_buffer(size + 1)
        fake.fake_call_log(buf, size + 1)
        return buf.value.decode().splitlines()

    gpu = devmm.Device.from_string("{device}:0")
    data = bytes(range(256))
    t = devmm.empty((256,), "uint8", device=gpu)
    t.buffer.copy_from_host(data)
    live = fake.fake_live_allocations()
    assert live >= 1, live
    fake.fake_clear_calls()

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            os.close(read_end)
            try:
                devmm.empty((4,), "float32", device=gpu)
            except RuntimeError as e:
                assert not isinstance(e, ImportError), type(e)
                message = str(e)
                assert "forked" in message and "`spawn` start method" in message, message
            else:
                raise AssertionError("a forked child allocated on the parent's runtime")
            # The inherited buffer is the parent's: dropping it frees nothing.
            del t
            gc.collect()
            cpu = devmm.empty((4,), "float32")
            assert cpu.device == devmm.Device.from_string("cpu")
            del cpu
            assert calls() == [], calls()
            assert fake.fake_live_allocations() == live
            status = 0
        except BaseException as e:
            os.write(write_end, repr(e).encode())
        finally:
            os._exit(status)
    os.close(write_end)
    report = b""
    while chunk := os.read(read_end, 65536):
        report += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, report.decode()

    # The parent: its memory intact, its runtime working.
    assert t.buffer.copy_to_host(nbytes=256).tobytes() == data
    u = devmm.empty((4,), "float32", device=gpu)
    del u, t
    gc.collect()
    print("ok")
    """
)

PLATFORMS = {
    "cuda": ("DEVMM_TEST_FAKE_CUDART", "DEVMM_CUDART_PATH", "cuda"),
    "rocm": ("DEVMM_TEST_FAKE_HIP", "DEVMM_HIP_PATH", "rocm"),
}


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_a_child_forked_after_the_runtime_started_is_refused(
    platform: str, fake_library: Callable[[str], str]
) -> None:
    fake_env, path_var, device = PLATFORMS[platform]
    library = fake_library(fake_env)
    env = dict(os.environ, **{path_var: library})
    env.pop("DEVMM_RUNTIME", None)
    script = SCRIPT.format(library=library, device=device)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
