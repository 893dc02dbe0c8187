"""One rule for every runtime (issue 29, defect 8): a runtime whose library
loads but finds no device here (Debian's HIP without an AMD kernel driver:
hipGetDeviceCount answers hipErrorNoDevice) is unavailable with the reason,
and Python's `available_runtimes()` agrees with `runtime_for` and
`devmm info`. Over the fake HIP with no device."""

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable


def test_a_runtime_without_a_device_is_not_available(fake_library: Callable[[str], str]) -> None:
    library = fake_library("DEVMM_TEST_FAKE_HIP")
    env = dict(os.environ, DEVMM_HIP_PATH=library)
    env.pop("DEVMM_RUNTIME", None)
    script = textwrap.dedent(
        f"""
        import ctypes
        import devmm

        fake = ctypes.CDLL({library!r})
        assert fake.fake_set_device_count(0) == 0
        assert "rocm" in devmm.runtime_names()
        try:
            devmm.runtime_for("rocm")
        except devmm.RuntimeUnavailableError as e:
            assert "hipErrorNoDevice (100)" in str(e), str(e)
        else:
            raise AssertionError("rocm loaded without a device")
        assert "rocm" not in {{rt.name for rt in devmm.available_runtimes()}}
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
