"""Every public function and method, driven with hostile arguments in a
subprocess (``hostile_driver.py``): the run must end normally, with no
signal, abort, ``PanicException``, ``SystemError`` or hang."""

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

DRIVER = Path(__file__).with_name("hostile_driver.py")


def test_hostile_arguments_never_crash_panic_or_hang() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVMM_TEST_FAKE")}
    env.setdefault("DEVMM_HOSTILE_EXAMPLES", "25")
    run = subprocess.run(
        [sys.executable, str(DRIVER)], capture_output=True, text=True, timeout=300, env=env
    )
    output = run.stdout + run.stderr
    if run.returncode < 0:
        raise AssertionError(f"killed by {signal.Signals(-run.returncode).name}:\n{output[-4000:]}")
    assert run.returncode == 0, output[-4000:]
    assert "PanicException" not in output, output[-4000:]
    calls = re.search(r"hostile calls: (\d+)", run.stdout)
    targets = re.search(r"hostile targets: (\d+)", run.stdout)
    assert calls and targets, output[-4000:]
    # Every public callable was reached, each with several examples.
    assert int(targets.group(1)) >= 150 and int(calls.group(1)) >= 10 * int(targets.group(1)), run.stdout
