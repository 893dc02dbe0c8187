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
    so a ``"torch"`` arrow stays when the plugin is removed.

    ``DevmmWorkerPlugin(factory, *, arrows=(), name="devmm")``: ``arrows``
    names provide arrows among ``"cupy"`` and ``"torch"``; ``name`` is the
    plugin's name on the workers (:func:`cluster_statistics` finds it by it).

    Raises
    ------
    ValueError
        An arrow that is not ``"cupy"`` or ``"torch"`` (``"numpy"`` cannot
        be worker-wide: it says why).

    Examples
    --------
    >>> import devmm
    >>> from devmm.integrations.dask import DevmmWorkerPlugin
    >>> from devmm.mrs.cpu import MallocMemoryResource
    >>> plugin = DevmmWorkerPlugin(MallocMemoryResource)
    >>> client.register_plugin(plugin)  # doctest: +SKIP
    >>> DevmmWorkerPlugin(MallocMemoryResource, arrows=["numpy"])
    Traceback (most recent call last):
        ...
    ValueError: NumPy's allocator is per contextvars context ...
    """

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
        """Dask's call on each worker: makes ``factory()`` the current
        resource of its device (process-wide) and installs the arrows.

        Examples
        --------
        >>> import devmm
        >>> from devmm.integrations.dask import DevmmWorkerPlugin
        >>> from devmm.mrs.cpu import MallocMemoryResource
        >>> plugin = DevmmWorkerPlugin(lambda: devmm.StatisticsAdaptor(MallocMemoryResource()))
        >>> plugin.setup(worker=None)  # what Dask does on each worker
        >>> devmm.get_current_memory_resource("cpu") is plugin.mr
        True
        >>> plugin.teardown(worker=None)
        """
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
        """Dask's call when the plugin leaves a worker: uninstalls the arrows
        (but ``"torch"``'s) and restores the previous current resource.

        Examples
        --------
        >>> import devmm
        >>> from devmm.integrations.dask import DevmmWorkerPlugin
        >>> from devmm.mrs.cpu import MallocMemoryResource
        >>> before = devmm.get_current_memory_resource("cpu")
        >>> plugin = DevmmWorkerPlugin(MallocMemoryResource)
        >>> plugin.setup(worker=None)
        >>> plugin.teardown(worker=None)
        >>> devmm.get_current_memory_resource("cpu") is before, plugin.mr
        (True, None)
        """
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
    plugin ``name`` built there.

    Raises
    ------
    ValueError
        A worker has no plugin ``name``, or its stack no
        ``StatisticsAdaptor``.

    Examples
    --------
    >>> import devmm
    >>> from devmm.integrations.dask import COLUMNS, DevmmWorkerPlugin, cluster_statistics
    >>> COLUMNS
    ('current_bytes', 'peak_bytes', 'total_bytes', 'allocations', 'deallocations')
    >>> from devmm.mrs.cpu import MallocMemoryResource
    >>> client.register_plugin(DevmmWorkerPlugin(lambda: devmm.StatisticsAdaptor(MallocMemoryResource())))  # doctest: +SKIP
    >>> cluster_statistics(client)  # doctest: +SKIP
    {'tcp://127.0.0.1:40325': {'current_bytes': 0, 'peak_bytes': 0, ...}}
    """
    rows = client.run(_worker_statistics, name)
    return dict(sorted(rows.items()))
