"""Memory statistics as ``rmm.statistics`` users know them.

- ``enable_statistics(device=None)`` wraps the current resource of
  ``device`` (the default device when ``None``) in a ``StatisticsAdaptor``,
  process-wide, unless it already is one.
- ``get_statistics(device=None)`` returns the counters of the current
  resource when it is a ``StatisticsAdaptor``, else ``None``.
- ``statistics(device=None)`` is a context manager opening a scope: a
  fresh ``StatisticsAdaptor`` over the resource current at entry, made
  current in this context until exit. Scopes nest (an inner scope's
  allocations count in every outer one too) and belong to their context,
  so threads and asyncio tasks each see their own.
- ``push_statistics()`` / ``pop_statistics()`` open and close such a scope
  without a ``with`` block; ``pop_statistics`` returns its counters.
- ``profiler`` (a decorator and a context manager) records per-name call
  counts, peak and total bytes into ``ProfilerRecords``
  (``default_profiler_records`` unless told otherwise), and, when the
  profiled resource has a pool of its own below it, that pool's figures at
  the run's end (``ProfilerRecords.pools``); ``report()`` makes the table,
  with each pool's reserved, used and high-water bytes and its
  fragmentation (reserved minus used).

The counting and the records' arithmetic and report live in the Rust core
(``devmm::statistics``), and so does the registry these scopes are made
current in (its override scope is a ``contextvars`` variable, so a scope
counts what Rust code allocates inside it too). This module composes its
scopes from the registry; ``push_statistics`` keeps its scopes in the
registry's one chain of overrides too (docs/adr/0017)."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, cast

from ._core.device import Device
from ._devmm import (
    ProfilerRecords,
    _pop_override,
    _push_override,
    StatisticsAdaptor,
    get_current_memory_resource,
    set_current_memory_resource,
    using_memory_resource,
)

__all__ = [
    "MemoryRecord",
    "PoolStatistics",
    "ProfilerRecords",
    "Statistics",
    "default_profiler_records",
    "enable_statistics",
    "get_statistics",
    "pop_statistics",
    "profiler",
    "push_statistics",
    "statistics",
]

_F = TypeVar("_F", bound=Callable[..., Any])


@dataclasses.dataclass(frozen=True)
class Statistics:
    """A statistics adaptor's counters at one moment (its ``statistics``),
    with devmm's names and rmm's (``current_count``, ``total_count``).

    Examples
    --------
    >>> import devmm
    >>> from devmm.mrs.cpu import MallocMemoryResource
    >>> stats = devmm.StatisticsAdaptor(MallocMemoryResource())
    >>> buf = devmm.DeviceBuffer(100, mr=stats)
    >>> stats.statistics
    Statistics(current_bytes=100, peak_bytes=100, total_bytes=100, allocations=1, deallocations=0)
    >>> stats.statistics.current_count, stats.statistics.total_count
    (1, 1)
    """

    current_bytes: int
    """Bytes allocated and not yet deallocated."""
    peak_bytes: int
    """The most bytes live at once."""
    total_bytes: int
    """Bytes ever allocated."""
    allocations: int
    """Successful allocations."""
    deallocations: int
    """Successful deallocations."""

    @property
    def current_count(self) -> int:
        """Allocations not yet deallocated (never below zero, as the core's
        counters never are)."""
        return max(self.allocations - self.deallocations, 0)

    @property
    def total_count(self) -> int:
        """Allocations ever made (rmm's name for ``allocations``)."""
        return self.allocations


@dataclasses.dataclass(frozen=True)
class PoolStatistics:
    """A memory pool's figures as its driver keeps them
    (``cudaMemPoolGetAttribute``), from ``pool_statistics()`` of a resource
    over a pool of its own (``CudaAsyncMemoryResource``).

    Examples
    --------
    >>> from devmm.statistics import PoolStatistics
    >>> pool = PoolStatistics(reserved_bytes=4096, reserved_high_bytes=8192,
    ...                       used_bytes=1024, used_high_bytes=2048)
    >>> pool.fragmentation_bytes
    3072
    """

    reserved_bytes: int
    """Device memory the pool holds now, used or not."""
    reserved_high_bytes: int
    """The most it held since it was made or its marks were reset."""
    used_bytes: int
    """Bytes of live blocks (a freed block counts until its free is reached
    on its stream)."""
    used_high_bytes: int
    """The most its blocks used since it was made or its marks were reset."""

    @property
    def fragmentation_bytes(self) -> int:
        """Reserved memory no block uses: what the pool keeps for reuse and
        what ``trim`` could give back."""
        return max(self.reserved_bytes - self.used_bytes, 0)


@dataclasses.dataclass(frozen=True)
class MemoryRecord:
    """What a ``profiler`` gathered for one name: a value of
    ``ProfilerRecords.records``.

    Examples
    --------
    >>> import devmm
    >>> from devmm.statistics import ProfilerRecords, profiler
    >>> records = ProfilerRecords()
    >>> with profiler(records=records, name="load"):
    ...     devmm.DeviceBuffer(256).free()
    >>> records.records["load"]
    MemoryRecord(num_calls=1, memory_total=256, memory_peak=256)
    """

    num_calls: int
    """Times the named code ran."""
    memory_total: int
    """Bytes it allocated, over all calls."""
    memory_peak: int
    """The most bytes live at once during any one call."""

default_profiler_records = ProfilerRecords()
"""The records a ``profiler`` fills when none are named."""

def enable_statistics(device: Device | str | None = None) -> StatisticsAdaptor:
    """Makes the process-wide current resource of ``device`` count its
    allocations, and returns the ``StatisticsAdaptor`` that does.

    ``device``: a ``Device``, a string such as ``"cuda:0"``, or ``None``
    for the default device. Wraps the current resource in a new
    ``StatisticsAdaptor`` and installs it process-wide
    (``set_current_memory_resource``), unless the current resource already
    is one: then that one is returned and nothing changes.

    Raises
    ------
    ValueError
        ``device`` is not a device spelling.
    RuntimeUnavailableError
        No runtime serves ``device``.

    Examples
    --------
    >>> import devmm
    >>> from devmm.statistics import enable_statistics, get_statistics
    >>> previous = devmm.get_current_memory_resource("cpu")
    >>> stats = enable_statistics("cpu")
    >>> devmm.get_current_memory_resource("cpu") is stats is enable_statistics("cpu")
    True
    >>> buf = devmm.DeviceBuffer(100)
    >>> get_statistics("cpu").current_bytes
    100
    >>> buf.free()
    >>> devmm.set_current_memory_resource(previous) is stats  # undo: returns the one replaced
    True
    """
    current = get_current_memory_resource(device)
    if isinstance(current, StatisticsAdaptor):
        return current
    stats = StatisticsAdaptor(current)
    set_current_memory_resource(stats)
    return stats


def get_statistics(device: Device | str | None = None) -> Statistics | None:
    """The counters of ``device``'s current resource in this context, or
    ``None`` when it is not a ``StatisticsAdaptor``.

    ``device``: a ``Device``, a device string, or ``None`` for the default
    device. Returns a :class:`Statistics` or ``None``.

    Examples
    --------
    >>> import devmm
    >>> from devmm.statistics import get_statistics, statistics
    >>> get_statistics("cpu") is None  # the default resource counts nothing
    True
    >>> with statistics("cpu"):
    ...     buf = devmm.DeviceBuffer(32)
    ...     print(get_statistics("cpu"))
    Statistics(current_bytes=32, peak_bytes=32, total_bytes=32, allocations=1, deallocations=0)
    """
    current = get_current_memory_resource(device)
    if isinstance(current, StatisticsAdaptor):
        return current.statistics
    return None


@contextlib.contextmanager
def statistics(device: Device | str | None = None) -> Iterator[StatisticsAdaptor]:
    """A statistics scope for the ``with`` block; yields its adaptor.

    A fresh ``StatisticsAdaptor`` over ``device``'s current resource (the
    default device when ``None``) is current in this context until the
    block ends; scopes nest, and an inner scope's allocations count in the
    outer ones too.

    Examples
    --------
    >>> import devmm
    >>> from devmm.statistics import statistics
    >>> with statistics("cpu") as outer:
    ...     with statistics("cpu") as inner:
    ...         devmm.DeviceBuffer(32).free()
    >>> outer.total_bytes, inner.total_bytes, outer.current_bytes
    (32, 32, 0)
    """
    stats = StatisticsAdaptor(get_current_memory_resource(device))
    with using_memory_resource(stats):
        yield stats


def push_statistics(device: Device | str | None = None) -> None:
    """Opens a statistics scope in this context until ``pop_statistics``:
    ``statistics(device)`` without a ``with`` block. Returns ``None``.

    Examples
    --------
    >>> import devmm
    >>> from devmm.statistics import pop_statistics, push_statistics
    >>> push_statistics("cpu")
    >>> buf = devmm.DeviceBuffer(16)
    >>> pop_statistics("cpu")
    Statistics(current_bytes=16, peak_bytes=16, total_bytes=16, allocations=1, deallocations=0)
    """
    _push_override(StatisticsAdaptor(get_current_memory_resource(device)))


def pop_statistics(device: Device | str | None = None) -> Statistics | None:
    """Closes the innermost scope ``push_statistics`` opened on ``device``
    in this context and returns its counters; ``None`` when none is open.

    Examples
    --------
    >>> import devmm
    >>> from devmm.statistics import pop_statistics, push_statistics
    >>> push_statistics()
    >>> devmm.DeviceBuffer(8).free()
    >>> pop_statistics().total_bytes
    8
    >>> pop_statistics() is None  # nothing left open
    True
    """
    # The core's one chain of overrides keeps the pushed scopes, per context.
    stats = _pop_override(device)
    return stats.statistics if isinstance(stats, StatisticsAdaptor) else None


class profiler:
    """Records the memory a function or a block uses, by name.

    As a decorator (``@profiler()``), every call of the function is one run
    named after it (``module.qualname``); as a context manager
    (``with profiler(name="load"):``), the block is one run of ``name``.
    Each run is a statistics scope; at its end the scope's total and peak
    bytes go into ``records`` (``default_profiler_records`` unless given),
    and so do the figures of the pool below the profiled resource, if it
    has one (``records.pools``).

    ``profiler(*, records=None, name="", device=None)``; ``device`` is a
    ``Device``, a device string or ``None`` (the default device).

    Raises
    ------
    ValueError
        Entering a ``with profiler():`` block without a ``name``.

    Examples
    --------
    >>> import devmm
    >>> from devmm.statistics import ProfilerRecords, profiler
    >>> records = ProfilerRecords()
    >>> @profiler(records=records, name="load")
    ... def load():
    ...     return devmm.DeviceBuffer(256)
    >>> load().free()
    >>> with profiler(records=records, name="block"):
    ...     devmm.DeviceBuffer(10).free()
    >>> print(records.report())
    Memory Profiling
    ================
    <BLANKLINE>
    Name       ncalls      peak bytes     total bytes
    load            1             256             256
    block           1              10              10
    <BLANKLINE>
    >>> with profiler():
    ...     pass
    Traceback (most recent call last):
        ...
    ValueError: profiler(name=...) needs a name when used as a context manager
    """

    def __init__(
        self,
        *,
        records: ProfilerRecords | None = None,
        name: str = "",
        device: Device | str | None = None,
    ) -> None:
        self.records = default_profiler_records if records is None else records
        self.name = name
        self.device = device
        # The scopes this profiler opened, per context: one object may be
        # entered by several threads or tasks at once.
        self._open: contextvars.ContextVar[
            tuple[tuple[contextlib.AbstractContextManager[StatisticsAdaptor], StatisticsAdaptor], ...]
        ] = contextvars.ContextVar(f"devmm.profiler.{id(self)}", default=())

    def __call__(self, func: _F) -> _F:
        name = self.name or f"{func.__module__}.{func.__qualname__}"

        def run() -> profiler:
            return profiler(records=self.records, name=name, device=self.device)

        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                with run():
                    return await func(*args, **kwargs)

            return cast(_F, run_async)

        @functools.wraps(func)
        def run_sync(*args: Any, **kwargs: Any) -> Any:
            with run():
                return func(*args, **kwargs)

        return cast(_F, run_sync)

    def __enter__(self) -> profiler:
        if not self.name:
            raise ValueError("profiler(name=...) needs a name when used as a context manager")
        scope = statistics(self.device)
        stats = scope.__enter__()
        self._open.set(self._open.get() + ((scope, stats),))
        return self

    def __exit__(self, *exc: object) -> None:
        opened = self._open.get()
        if not opened:
            raise RuntimeError(f"profiler {self.name!r} exited in a context that did not enter it")
        scope, stats = opened[-1]
        self._open.set(opened[:-1])
        scope.__exit__(None, None, None)
        self.records.add(self.name, stats.statistics)
        self.records.add_pool(stats)
