"""Without a GPU runtime, resources and streams written in Python serve a
CUDA device, and the CuPy, rmm and Numba bridges work over them (ADR 0018):
the scenarios of ``no_gpu_runtime_driver.py``, in an interpreter whose CUDA
runtime cannot load, even where one is installed."""

import os
import subprocess
import sys
from pathlib import Path

DRIVER = Path(__file__).with_name("no_gpu_runtime_driver.py")


def test_python_resources_streams_and_bridges_need_no_gpu_runtime() -> None:
    env = {k: v for k, v in os.environ.items() if k != "DEVMM_RUNTIME"}
    env["DEVMM_CUDART_PATH"] = "/nonexistent/libcudart.so"
    env["DEVMM_HIP_PATH"] = "/nonexistent/libamdhip64.so"
    done = subprocess.run([sys.executable, str(DRIVER)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "python_resource_and_stream",
        "cupy_allocates_through_a_python_resource",
        "a_cupy_allocation_keeps_its_stream_until_it_is_freed",
        "a_cupy_allocator_as_a_resource",
        "cupys_current_allocator_as_a_resource",
        "rmm_allocates_through_a_python_resource",
        "an_rmm_resource_as_a_resource",
        "a_hipmm_resource_as_a_resource",
        "numba_allocates_through_a_python_resource",
        "numba_stand_in_without_a_pending_free_queue",
    ]
