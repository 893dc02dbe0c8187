"""devmm on every Dask worker.

:class:`DevmmWorkerPlugin` builds a resource stack on each worker from a
picklable factory, makes it the worker's current resource for its device,
and optionally installs the process-wide provide arrows there (``"cupy"``,
``"torch"``); unregistering the plugin (``client.unregister_worker_plugin``)
undoes all of it on every worker. :func:`cluster_statistics` gathers the
figures of each worker's ``StatisticsAdaptor`` into one table.

>>> from devmm.integrations.dask import DevmmWorkerPlugin
>>> plugin = DevmmWorkerPlugin(lambda: None, arrows=("cupy",))
>>> plugin.name, plugin.arrows
('devmm', ('cupy',))

NumPy's allocator is per ``contextvars`` context (NEP 49) and Dask runs
each task in a copy of the worker's context, made before any plugin runs,
so a handler installed by the plugin would never reach a task: the
``"numpy"`` arrow is refused. Install it in the task instead, over the
worker's stack: ``with devmm.integrations.numpy.install(
devmm.get_current_memory_resource(cpu)): ...`` (ADR 0014).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Iterable

from distributed import Client, Worker
from distributed.diagnostics.plugin import WorkerPlugin

from .._devmm import (
    DeviceMemoryResource,
    StatisticsAdaptor,
    get_current_memory_resource,
    set_current_memory_resource,
)
from ._installer import Installer

__all__ = ["DevmmWorkerPlugin", "cluster_statistics"]

ARROWS = ("cupy", "torch")
#: The columns of :func:`cluster_statistics`, one row per worker.
COLUMNS = ("current_bytes", "peak_bytes", "total_bytes", "allocations", "deallocations")


class DevmmWorkerPlugin(WorkerPlugin):
    """Makes ``factory()`` (called once on each worker; it must pickle, as
    Dask ships the plugin to the workers) the worker's current devmm
    resource for its device, and installs the provide arrows named in
    ``arrows`` over it. Register with ``client.register_plugin(plugin)``.

    PyTorch never lets go of an allocator (see ``devmm.integrations.torch``),
    so a ``"torch"`` arrow stays when the plugin is removed."""

    def __init__(
        self,
        factory: Callable[[], DeviceMemoryResource],
        *,
        arrows: Iterable[str] = (),
        name: str = "devmm",
    ) -> None:
        self.factory = factory
        self.arrows = tuple(arrows)
        if "numpy" in self.arrows:
            raise ValueError(
                "NumPy's allocator is per contextvars context and Dask runs every task in a "
                "context copied before plugins run, so a worker-wide NumPy arrow cannot exist; "
                "install devmm.integrations.numpy in the task, over "
                "devmm.get_current_memory_resource(cpu)"
            )
        unknown = sorted(set(self.arrows) - set(ARROWS))
        if unknown:
            raise ValueError(f"unknown arrows {unknown}; devmm installs {list(ARROWS)} on workers")
        self.name = name
        self.mr: DeviceMemoryResource | None = None
        self._previous: DeviceMemoryResource | None = None
        self._installers: list[Installer] = []

    def setup(self, worker: Worker) -> None:
        mr = self.factory()
        previous = get_current_memory_resource(mr.device)
        installers: list[Installer] = []
        try:
            for arrow in self.arrows:
                installers.append(importlib.import_module(f"devmm.integrations.{arrow}").install(mr))
        except BaseException:
            _uninstall(installers)
            raise
        set_current_memory_resource(mr)
        self.mr, self._previous, self._installers = mr, previous, installers

    def teardown(self, worker: Worker) -> None:
        if self.mr is None or self._previous is None:
            return
        _uninstall(self._installers)
        set_current_memory_resource(self._previous)
        self.mr, self._previous, self._installers = None, None, []


def _uninstall(installers: list[Installer]) -> None:
    for installer in reversed(installers):
        if getattr(installer, "library", "") != "torch":
            installer.uninstall()


def statistics_of(mr: Any) -> dict[str, int]:
    """The counters of the first ``StatisticsAdaptor`` in ``mr``'s chain."""
    seen = mr
    while seen is not None and not isinstance(seen, StatisticsAdaptor):
        seen = getattr(seen, "upstream", None)
    if seen is None:
        raise ValueError(
            f"{mr!r} has no StatisticsAdaptor in its chain; wrap the stack the factory builds "
            f"in one to gather its statistics"
        )
    return {column: int(getattr(seen, column)) for column in COLUMNS}


def _worker_statistics(name: str, dask_worker: Worker) -> dict[str, int]:
    plugin = dask_worker.plugins.get(name)
    if not isinstance(plugin, DevmmWorkerPlugin) or plugin.mr is None:
        raise ValueError(f"worker {dask_worker.address} has no devmm plugin named {name!r}")
    return statistics_of(plugin.mr)


def cluster_statistics(client: Client, name: str = "devmm") -> dict[str, dict[str, int]]:
    """Each worker's statistics, by worker address: a row of
    :data:`COLUMNS` from the ``StatisticsAdaptor`` in the stack that the
    plugin ``name`` built there."""
    rows = client.run(_worker_statistics, name)
    return dict(sorted(rows.items()))
