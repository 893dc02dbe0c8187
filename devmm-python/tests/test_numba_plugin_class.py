"""The Numba plugin class is made once per process, however many threads ask
for it first. Numba itself is not needed: numba.cuda and the class factory
are replaced by fakes (the bridge tests run the real plugin)."""

import threading
import time
from typing import Any

import pytest

import devmm.integrations.numba as plugin_module


def test_threads_asking_at_once_all_get_the_one_plugin_class(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[type] = []

    def slow_make(numba_cuda: Any) -> type:
        assert numba_cuda == "fake numba.cuda"
        time.sleep(0.05)  # a window in which an unguarded check lets others in
        cls = type("FakePlugin", (), {})
        made.append(cls)
        return cls

    monkeypatch.setattr(plugin_module, "_plugin_class_cache", None)
    monkeypatch.setattr(plugin_module, "_numba_cuda_module", lambda: "fake numba.cuda")
    monkeypatch.setattr(plugin_module, "_make_plugin_class", slow_make)
    start = threading.Barrier(8)
    got: list[type] = []

    def ask() -> None:
        start.wait()
        got.append(plugin_module._plugin_class())

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 1
    assert got == made * 8
    assert plugin_module.DevmmEMMPlugin is made[0]
