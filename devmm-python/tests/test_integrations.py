"""The install handle every provide arrow returns, as the seed's
``Installer(library, restore)``; the NumPy arrow is one."""

import threading

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
    with pytest.raises(RuntimeError, match="reverse order of install"):
        installer.uninstall()
    assert installer.installed
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
    import inspect

    from devmm.integrations import cupy, numba, numpy, rmm

    assert devmm.integrations.__all__ == ["Installer", "cupy", "numba", "numpy", "rmm"]
    for module in (cupy, numpy, rmm):
        assert module.__all__ == ["install"], module.__name__
        assert str(inspect.signature(module.install)) == "(mr: 'DeviceMemoryResource') -> 'Installer'"
    assert numba.__all__ == ["DevmmEMMPlugin", "install"]
    # The plugin serves devmm's current resource per device, as the seed's does.
    assert str(inspect.signature(numba.install)) == "() -> 'Installer'"
    assert str(inspect.signature(Installer)).startswith("(library: 'str', restore: 'Callable[[], None]'")

