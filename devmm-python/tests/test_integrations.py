"""The install handle every provide arrow returns, as the seed's
``Installer(library, restore)``; the NumPy arrow is one."""

import inspect
import threading
import types
import typing

import numpy as np
import pytest

import devmm
import devmm.integrations
from devmm.integrations import Installer
from devmm.mrs.cpu import MallocMemoryResource


def test_an_installer_restores_once() -> None:
    calls: list[str] = []
    installer = Installer("lib", lambda: calls.append("restore"))
    assert installer.installed and installer.library == "lib" and installer.mr is None
    assert repr(installer) == "Installer(library='lib', installed)"
    installer.uninstall()
    installer.uninstall()
    assert calls == ["restore"] and not installer.installed
    assert repr(installer) == "Installer(library='lib', uninstalled)"


def test_an_installer_is_a_context_manager_that_restores_on_error() -> None:
    calls: list[str] = []
    with pytest.raises(KeyError):
        with Installer("lib", lambda: calls.append("restore")) as installer:
            assert installer.installed
            raise KeyError("boom")
    assert calls == ["restore"] and not installer.installed


def test_concurrent_uninstalls_restore_once() -> None:
    calls: list[int] = []
    inside, release = threading.Event(), threading.Event()

    def restore() -> None:
        calls.append(1)
        inside.set()
        assert release.wait(10)

    installer = Installer("lib", restore)
    first = threading.Thread(target=installer.uninstall)
    first.start()
    assert inside.wait(10)
    # The first uninstall is inside restore: a second one must neither run
    # it again nor wait for it.
    second = threading.Thread(target=installer.uninstall)
    second.start()
    second.join(10)
    assert not second.is_alive()
    release.set()
    first.join(10)
    assert calls == [1] and not installer.installed


def test_a_restore_that_uninstalls_again_does_not_deadlock() -> None:
    calls: list[str] = []
    installer: Installer

    def restore() -> None:
        calls.append("restore")
        installer.uninstall()

    installer = Installer("lib", restore)
    done = threading.Thread(target=installer.uninstall, daemon=True)
    done.start()
    done.join(10)
    assert not done.is_alive() and calls == ["restore"] and not installer.installed


def test_an_installer_stays_installed_while_it_is_not_current_or_restore_fails() -> None:
    current = [False]
    installer = Installer("lib", lambda: None, mr="the mr", is_current=lambda: current[0])
    with pytest.raises(RuntimeError, match="reverse order of install") as refused:
        installer.uninstall()
    assert "made it allocate through 'the mr'; uninstall" in str(refused.value)
    assert installer.installed
    # Without a resource (Numba's installer), the message names none.
    unnamed = Installer("lib", lambda: None, is_current=lambda: False)
    with pytest.raises(RuntimeError, match="made it allocate; uninstall the later one first"):
        unnamed.uninstall()
    current[0] = True
    installer.uninstall()
    assert not installer.installed

    def refuse() -> None:
        raise RuntimeError("cannot go back")

    stuck = Installer("lib", refuse)
    with pytest.raises(RuntimeError, match="cannot go back"):
        stuck.uninstall()
    assert stuck.installed


def test_the_numpy_arrow_returns_an_installer() -> None:
    stats = devmm.StatisticsAdaptor(MallocMemoryResource())
    with devmm.integrations.numpy.install(stats) as installer:
        assert isinstance(installer, Installer) and installer.mr is stats
        assert repr(installer) == "Installer(library='NumPy', installed)"
        np.ones(10)
    assert stats.total_bytes >= 80 and not installer.installed


def test_each_integration_module_exports_the_seeds_names_and_signatures() -> None:
    from devmm.integrations import cupy, numba, numpy, rmm

    assert devmm.integrations.__all__ == ["Installer", "cupy", "numba", "numpy", "rmm"]
    for module in (cupy, numpy, rmm):
        assert module.__all__ == ["install"], module.__name__
        assert str(inspect.signature(module.install)) == "(mr: 'DeviceMemoryResource') -> 'Installer'"
    assert numba.__all__ == ["DevmmEMMPlugin", "install"]
    # The plugin serves devmm's current resource per device, as the seed's does.
    assert str(inspect.signature(numba.install)) == "() -> 'Installer'"
    assert str(inspect.signature(Installer)).startswith("(library: 'str', restore: 'Callable[[], None]'")



def test_each_integration_install_has_resolvable_type_hints() -> None:
    from devmm.integrations import cupy, numba, numpy, rmm

    for module in (cupy, numpy, rmm):
        hints = typing.get_type_hints(module.install)
        assert hints == {"mr": devmm.DeviceMemoryResource, "return": Installer}, module.__name__
    assert typing.get_type_hints(numba.install) == {"return": Installer}


def _python_defined(module: types.ModuleType) -> list[object]:
    """The functions and classes ``module`` exports that Python code
    defines (compiled ones carry no annotations to resolve), with the
    methods of those classes."""
    found: list[object] = []
    for name in getattr(module, "__all__", []):
        value = getattr(module, name)
        if inspect.isfunction(value):
            found.append(value)
        elif inspect.isclass(value) and value.__module__.startswith("devmm.") and not value.__module__.endswith("_devmm"):
            found.append(value)
            found.extend(v for v in vars(value).values() if inspect.isfunction(v))
    return found


def test_the_packages_python_functions_have_resolvable_type_hints() -> None:
    import devmm.mrs.cpu
    import devmm.mrs.cuda
    import devmm.mrs.rocm
    import devmm.statistics
    import devmm.testing
    from devmm.integrations import cupy, numba, numpy, rmm

    modules = [devmm, devmm.mrs.cpu, devmm.mrs.cuda, devmm.mrs.rocm, devmm.statistics, devmm.testing]
    modules += [devmm.integrations, cupy, numba, numpy, rmm]
    checked = [obj for module in modules for obj in _python_defined(module)]
    assert devmm.integrations.numpy.install in checked and Installer.uninstall in checked
    for obj in checked:
        typing.get_type_hints(obj)  # raises NameError for a name only type checkers see


def test_an_rmm_stand_in_is_told_apart_by_its_resource_classes(monkeypatch: pytest.MonkeyPatch) -> None:
    # A module no distribution installed (a test's stand-in for hipMM, as
    # the seed's tests make): its Hip* resource classes say it is hipMM.
    import sys
    import types

    import devmm.integrations.rmm
    from devmm.testing import RecordingMemoryResource

    resources: dict[int, object] = {0: "hipMM's own"}

    class CallbackMemoryResource:
        def __init__(self, allocate: object, deallocate: object) -> None:
            self.allocate, self.deallocate = allocate, deallocate

    fake = types.ModuleType("rmm")
    fake.mr = types.SimpleNamespace(  # type: ignore[attr-defined]
        HipMemoryResource=object,
        CallbackMemoryResource=CallbackMemoryResource,
        get_per_device_resource=resources.__getitem__,
        set_per_device_resource=resources.__setitem__,
    )
    monkeypatch.setitem(sys.modules, "rmm", fake)
    monkeypatch.delenv("DEVMM_RUNTIME", raising=False)
    recording = RecordingMemoryResource(devmm.Device.from_string("rocm:0"))
    with devmm.integrations.rmm.install(recording):
        bridge = resources[0]
        assert isinstance(bridge, CallbackMemoryResource)
        bridge.deallocate(bridge.allocate(64, None), 64, None)  # type: ignore[attr-defined]
    assert resources[0] == "hipMM's own"
    assert [call[0] for call in recording.calls] == ["allocate", "deallocate"]
    with pytest.raises(devmm.RuntimeUnavailableError, match="serves rocm, not cuda"):
        devmm.integrations.rmm.install(RecordingMemoryResource(devmm.Device.from_string("cuda:0")))
