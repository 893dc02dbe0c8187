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
    entered = threading.Barrier(8)
    installer = Installer("lib", lambda: calls.append(1))

    def race() -> None:
        entered.wait()
        installer.uninstall()

    threads = [threading.Thread(target=race) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [1]


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
        assert repr(installer) == "Installer(library='numpy', installed)"
        np.ones(10)
    assert stats.total_bytes >= 80 and not installer.installed
