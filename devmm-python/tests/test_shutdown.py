"""Exports and buffers still alive when the interpreter exits are released
safely, whatever resource they came from."""

import subprocess
import sys
import textwrap


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
