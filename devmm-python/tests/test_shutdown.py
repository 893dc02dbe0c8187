"""Exports and buffers still alive when the interpreter exits are released
safely, whatever resource they came from."""

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable

import pytest


def test_live_exports_at_interpreter_exit_are_safe() -> None:
    script = textwrap.dedent(
        """
        import ctypes, sys, threading
        import numpy as np
        import devmm
        from devmm.mrs.cpu import BytearrayMemoryResource

        blocks = {}
        def alloc(n, s):
            b = ctypes.create_string_buffer(n)
            blocks[ctypes.addressof(b)] = b
            return ctypes.addressof(b)
        def dealloc(p, n, s):
            del blocks[p]
        python_mr = devmm.CallbackMemoryResource(alloc, dealloc)

        keep = []
        for mr in (None, BytearrayMemoryResource(), python_mr, devmm.StatisticsAdaptor(python_mr)):
            t = devmm.empty((16,), "float32", mr=mr)
            keep.append(np.from_dlpack(t))                 # consumed, held by NumPy
            keep.append(t.__dlpack__(max_version=(1, 0)))  # never consumed
            keep.append(t.__dlpack__())
            t.buffer.free()                                # closed, memory still exported
        sys.modules["__keep__"] = keep                     # lives until interpreter teardown
        # A consumer on another thread still holding an export at exit.
        worker_keep = []
        threading.Thread(target=lambda: worker_keep.append(np.from_dlpack(devmm.empty((4,), "int8", mr=python_mr)))).start()
        sys.modules["__worker_keep__"] = worker_keep
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    assert done.stderr == "", done.stderr  # no panic, no "Exception ignored", no leak report


def test_numpy_arrays_on_devmms_allocator_at_interpreter_exit_are_safe() -> None:
    # NumPy's last arrays, and so devmm's handler, are freed while the
    # interpreter finalises (it aborted the process here once).
    script = textwrap.dedent(
        """
        import sys
        import numpy as np
        import devmm
        import devmm.integrations.numpy as devmm_numpy
        from devmm.mrs.cpu import MallocMemoryResource

        installer = devmm_numpy.install(devmm.StatisticsAdaptor(MallocMemoryResource()))
        kept = np.ones(1000)
        sys.modules["__keep__"] = [np.arange(10), devmm.integrations.numpy.install(MallocMemoryResource())]
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    assert done.stderr == "", done.stderr


def test_a_logging_adaptor_alive_at_interpreter_exit_exits_quietly() -> None:
    # Its memory is freed while the interpreter finalises, after logging
    # shut down: the record is dropped, not an import error on stderr.
    script = textwrap.dedent(
        """
        import logging, sys
        import numpy as np
        import devmm
        from devmm.mrs.cpu import MallocMemoryResource

        logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
        logged = devmm.LoggingAdaptor(MallocMemoryResource())
        t = devmm.empty((2,), "float32", mr=logged)
        sys.modules["__keep__"] = [np.from_dlpack(devmm.empty((2,), "float32", mr=logged))]
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-X", "dev", "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "ok"
    assert done.stdout.count("allocate device=cpu:0") == 2  # logged while the program ran
    assert done.stderr == "", done.stderr


# Daemon threads still inside a devmm call when the interpreter exits:
# CPython before 3.14 ends such a thread with `pthread_exit` when it asks
# for the GIL again, and that forced unwind must never reach a Rust frame
# that catches it (the process aborts: "FATAL: exception not rethrown").
DAEMONS_AT_EXIT = textwrap.dedent(
    """
    import ctypes, sys, threading, time
    import devmm

    case = sys.argv[1]
    if case == "gpu":
        # Over the fake CUDA runtime: synchronize and allocation release the GIL.
        import devmm.mrs.cuda as mrs
        gpu = devmm.Device.from_string("cuda:0")
        stream = devmm.runtime_for(gpu).create_stream(gpu)
        mr = mrs.CudaRuntimeMemoryResource()

        def work():
            while True:
                stream.synchronize()
                devmm.DeviceBuffer(64, mr=mr, stream=stream).free()
    elif case == "python_resource":
        # A Python-defined resource on the (fake) GPU, called back from the
        # core on a thread that released the GIL. The callbacks release it
        # again, so the exit finds threads asking for it inside them, with the
        # call's arguments still held by the binding.
        blocks = {}

        def alloc(n, s):
            time.sleep(0)
            b = ctypes.create_string_buffer(n)
            blocks[ctypes.addressof(b)] = b
            return ctypes.addressof(b)

        def dealloc(p, n, s):
            time.sleep(0)
            del blocks[p]

        mr = devmm.CallbackMemoryResource(alloc, dealloc, device="cuda:0")

        def work():
            while True:
                devmm.empty((64,), "float32", mr=mr).free()
    else:
        # NumPy's arrays through devmm's handler over a Python resource.
        import numpy as np
        import devmm.integrations.numpy as devmm_numpy

        blocks = {}

        def alloc(n, s):
            # Python work long enough that the exit finds threads inside it.
            sum(range(1000))
            b = ctypes.create_string_buffer(max(n, 1))
            blocks[ctypes.addressof(b)] = b
            return ctypes.addressof(b)

        def dealloc(p, n, s):
            del blocks[p]

        devmm_numpy.install(devmm.CallbackMemoryResource(alloc, dealloc, dereferenceable=True))

        def work():
            while True:
                np.ones(1000).sum()

    for _ in range(8):
        threading.Thread(target=work, daemon=True).start()
    print("ok")
    """
)


@pytest.mark.parametrize("case", ["gpu", "python_resource", "numpy_handler"])
def test_daemon_threads_inside_devmm_calls_at_interpreter_exit_never_abort(
    case: str, fake_library: Callable[[str], str]
) -> None:
    env = dict(os.environ, DEVMM_CUDART_PATH=fake_library("DEVMM_TEST_FAKE_CUDART"))
    failures = []
    for _ in range(20):
        done = subprocess.run(
            [sys.executable, "-c", DAEMONS_AT_EXIT, case], capture_output=True, text=True, timeout=120, env=env
        )
        if done.returncode != 0 or done.stdout.strip() != "ok" or "FATAL" in done.stderr:
            failures.append((done.returncode, done.stderr[-300:]))
    assert failures == [], f"{len(failures)} of 20 runs failed: {failures[:3]}"


def test_a_daemon_thread_leaving_a_driver_call_as_finalisation_begins_is_parked(
    fake_library: Callable[[str], str],
) -> None:
    # Deterministic where the test above is statistical: the thread's
    # driver call returns while the exiting thread holds the GIL into
    # finalisation, so it asks for the GIL back after the check made when
    # the call returned, and CPython ends it there (`pthread_exit` inside
    # PyO3's re-attach); a finaliser running Python code hands it the GIL.
    script = textwrap.dedent(
        """
        import atexit, ctypes, os, sys, threading

        # C functions as exit handlers, so no Python code runs between
        # them: the last (registered first) keeps the GIL for 300 ms, the
        # one before it lets the thread's held driver work run.
        fake = ctypes.PyDLL(os.environ["DEVMM_CUDART_PATH"])  # keeps the GIL
        atexit.register(ctypes.PyDLL(None).usleep, 300000)
        atexit.register(fake.fake_release_work)

        import devmm

        gpu = devmm.Device.from_string("cuda:0")
        stream = devmm.runtime_for(gpu).create_stream(gpu)
        source = devmm.DeviceBuffer.to_device(bytes(64), device=gpu)
        target = devmm.DeviceBuffer(64, device=gpu, stream=stream)
        waiting = threading.Event()

        def work():
            fake.fake_hold_work(1)
            devmm.copy_device_to_ptr(source.ptr, target.ptr, 64, stream=stream)
            fake.fake_hold_work(0)
            waiting.set()
            stream.synchronize()  # without the GIL, until the exit lets the copy run
            print("returned before finalisation", flush=True)

        class Late:
            def __del__(self):
                for _ in range(10**6):  # gives the GIL to a thread asking for it
                    pass

        sys.modules["__keep__"] = [Late()]
        threading.Thread(target=work, daemon=True).start()
        waiting.wait()
        print("ok")
        """
    )
    env = dict(os.environ, DEVMM_CUDART_PATH=fake_library("DEVMM_TEST_FAKE_CUDART"))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok"], done.stdout
    assert done.stderr == "", done.stderr


def test_a_finalizer_calling_the_gpu_while_the_interpreter_exits_returns(
    fake_library: Callable[[str], str],
) -> None:
    # The thread finalising the interpreter releases the GIL around driver
    # calls too; unlike a daemon thread it must get it back, or exit hangs.
    script = textwrap.dedent(
        """
        import sys
        import devmm
        import devmm.mrs.cuda as mrs

        gpu = devmm.Device.from_string("cuda:0")
        stream = devmm.runtime_for(gpu).create_stream(gpu)
        mr = mrs.CudaRuntimeMemoryResource()

        class Late:
            def __del__(self):
                stream.synchronize()
                devmm.DeviceBuffer(64, mr=mr, stream=stream).free()
                print("finalized", flush=True)

        sys.modules["__keep__"] = [Late()]
        print("ok")
        """
    )
    env = dict(os.environ, DEVMM_CUDART_PATH=fake_library("DEVMM_TEST_FAKE_CUDART"))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok", "finalized"], done.stdout
    assert done.stderr == "", done.stderr
