"""The seed's private module paths that its tests import from: each is a
thin re-export, giving the very object the public name is."""

import importlib

import pytest

import devmm
import devmm.integrations
import devmm.testing

# seed module path -> (public home, the names it re-exports)
SEED_PATHS = {
    "devmm._core.memory_resource": (
        devmm,
        ["CallbackMemoryResource", "DeviceMemoryResource", "LimitingAdaptor", "LoggingAdaptor", "StatisticsAdaptor"],
    ),
    "devmm._core.registry": (
        devmm,
        ["get_current_memory_resource", "set_current_memory_resource", "using_memory_resource"],
    ),
    "devmm.integrations._support": (devmm.integrations, ["Installer"]),
    "devmm.testing._recording": (devmm.testing, ["RecordingMemoryResource", "RecordingMisuseError"]),
    "devmm.testing._conformance": (devmm.testing, ["dlpack_conformance", "mr_conformance"]),
}


@pytest.mark.parametrize("path", SEED_PATHS)
def test_a_seed_path_gives_the_public_objects(path: str) -> None:
    module = importlib.import_module(path)
    home, names = SEED_PATHS[path]
    assert sorted(module.__all__) == sorted(names)
    for name in names:
        assert getattr(module, name) is getattr(home, name), f"{path}.{name}"


def test_testing_is_a_package_with_the_same_public_names() -> None:
    assert hasattr(devmm.testing, "__path__")
    assert sorted(devmm.testing.__all__) == [
        "RecordingMemoryResource",
        "RecordingMisuseError",
        "dlpack_conformance",
        "mr_conformance",
    ]
    # The pytest mixin is not imported with the package (pytest is a test-time tool).
    import subprocess
    import sys

    script = "import sys, devmm.testing; assert 'devmm.testing._mr_conformance' not in sys.modules; print('ok')"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
