"""PyTorch allocating CUDA memory through devmm.

``install(mr)`` (or ``install({device: mr, ...})`` for several devices)
points PyTorch's CUDA allocator at a ``torch.cuda.memory.CUDAPluggableAllocator``
whose C entry points (``devmm_torch_malloc`` / ``devmm_torch_free``) are
exported by devmm's own extension module; each allocation goes to the
resource installed for the device PyTorch names, ordered on the stream it
passes, and each free back to the resource that made the block.

What PyTorch's pluggable allocator leaves out, devmm fills in:
:func:`memory_stats` answers with ``torch.cuda.memory_stats()``'s keys from
devmm's counts of PyTorch's blocks, and :func:`reset_peak_memory_stats`
starts a new peak. A failed allocation is logged (``devmm`` logger, with
devmm's full message) and reaches PyTorch as a C++ ``std::bad_alloc``,
which PyTorch raises as ``RuntimeError`` (not ``torch.OutOfMemoryError``:
only C++ code built against PyTorch can throw that; ADR 0015), and is
counted in ``memory_stats()["num_ooms"]``. ``Tensor.record_stream(s)`` (and
NCCL's collectives) reach devmm through the allocator's record-stream hook,
so a block's free waits for the work queued on those streams.

PyTorch swaps its allocator only before CUDA is initialised, and never
away from a pluggable one: ``install`` refuses once PyTorch has used CUDA,
and ``uninstall()`` raises ``RuntimeError`` (the resources keep serving
PyTorch until the process exits). :func:`mem_pool` works at any time: a
``torch.cuda.MemPool`` over the same resources, for the allocations of
``with torch.cuda.use_mem_pool(pool):`` blocks only; its allocation entry
point (``devmm_torch_pool_malloc``) returns NULL when out of memory rather
than throw, so PyTorch's caching allocator frees its cached blocks and
tries again before it raises ``torch.OutOfMemoryError``. PyTorch counts and
reports a pool's out-of-memory errors itself: devmm's ``on_out_of_memory``
hooks do not run for them, and ``num_ooms`` does not count them.

PyTorch calls a pool's entry points with its allocator lock held, which a
thread holding the GIL may wait for: nothing devmm does there waits for the
GIL. A chain that runs Python code (a resource written in Python, a
``FailureCallbackAdaptor``) is refused by :func:`mem_pool`, and a log record
made there is kept and emitted soon after by a thread of devmm's own (or
first by the next devmm record made where the GIL may be taken), with a
``deferred`` attribute set to ``True``."""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from typing import Any, Mapping, Union

import torch

from .. import _devmm
from .._core.device import Device
from .._devmm import DeviceMemoryResource
from ._installer import Installer

__all__ = ["TorchInstaller", "install", "mem_pool", "memory_stats", "reset_peak_memory_stats"]

Resources = Union[DeviceMemoryResource, Mapping[Any, DeviceMemoryResource]]


def _ordinal(device: Any) -> int:
    """A CUDA ordinal from an int, ``"cuda:1"``, a :class:`torch.device` or
    a :class:`devmm.Device`; ``None`` is PyTorch's current device."""
    if device is None:
        return int(torch.cuda.current_device())
    if isinstance(device, Device):
        return int(device.index)
    if isinstance(device, int):
        return device
    index = torch.device(device).index
    return 0 if index is None else int(index)


def _resources(resources: Resources) -> list[DeviceMemoryResource]:
    if isinstance(resources, DeviceMemoryResource):
        return [resources]
    chosen = []
    for key, mr in resources.items():
        if _ordinal(key) != mr.device.index:
            raise ValueError(
                f"{mr!r} allocates on {mr.device}, not on CUDA device {_ordinal(key)} it was given for"
            )
        chosen.append(mr)
    if not chosen:
        raise ValueError("give PyTorch at least one devmm resource")
    return chosen


class TorchInstaller(Installer):
    """PyTorch allocating through devmm, from ``install``. PyTorch cannot
    go back to another allocator, so ``uninstall()`` raises ``RuntimeError``.
    ``resources`` lists the resources PyTorch allocates through.

    Examples
    --------
    >>> from devmm.integrations.torch import TorchInstaller
    >>> installer = TorchInstaller([])  # what install() returns
    >>> installer.installed, installer.library
    (True, 'torch')
    """

    library = "torch"

    def __init__(self, resources: list[DeviceMemoryResource]) -> None:
        self.resources = resources

    @property
    def installed(self) -> bool:
        return True

    def uninstall(self) -> None:
        """Always raises ``RuntimeError``: PyTorch keeps its allocator until
        the process exits.

        Examples
        --------
        >>> from devmm.integrations.torch import TorchInstaller
        >>> TorchInstaller([]).uninstall()
        Traceback (most recent call last):
            ...
        RuntimeError: PyTorch cannot swap away from a pluggable CUDA allocator once it is made ...
        """
        raise RuntimeError(
            "PyTorch cannot swap away from a pluggable CUDA allocator once it is made (it is "
            "initialised on creation), so devmm keeps serving PyTorch's allocations until the "
            "process exits; install it in a process (or Dask worker) of its own instead"
        )

    def __repr__(self) -> str:
        return f"<TorchInstaller torch -> {self.resources!r}>"


def install(resources: Resources) -> TorchInstaller:
    """Makes PyTorch allocate CUDA memory through devmm: ``resources`` is one
    resource (for its device) or a mapping ``{device: mr}``. Must run before
    PyTorch initialises CUDA; raises ``RuntimeError`` otherwise, and when
    devmm already serves PyTorch.

    ``resources``: a ``DeviceMemoryResource`` on a CUDA device (or managed
    memory), or a mapping from devices (``0``, ``"cuda:1"``, a
    ``torch.device`` or a ``Device``) to such resources. Returns the
    :class:`TorchInstaller`.

    Raises
    ------
    ValueError
        A resource is not on a CUDA device.
    RuntimeError
        PyTorch has initialised CUDA, or devmm already serves it.

    Examples
    --------
    >>> import devmm.integrations.torch
    >>> from devmm.mrs.cpu import MallocMemoryResource
    >>> devmm.integrations.torch.install(MallocMemoryResource())
    Traceback (most recent call last):
        ...
    ValueError: invalid argument: PyTorch's CUDA allocator needs CUDA device (or managed) memory; ...

    With a CUDA device, before PyTorch's first CUDA tensor:

    >>> from devmm.mrs.cuda import CudaAsyncMemoryResource
    >>> devmm.integrations.torch.install(CudaAsyncMemoryResource("cuda:0"))  # doctest: +SKIP
    <TorchInstaller torch -> [CudaAsyncMemoryResource(...)]>
    >>> torch.zeros(1000, device="cuda")  # allocated by devmm  # doctest: +SKIP
    """
    chosen = _resources(resources)
    if torch.cuda.is_initialized():
        raise RuntimeError(
            "PyTorch has initialised CUDA and with it its caching allocator, which it will not "
            "swap; call devmm.integrations.torch.install before the first CUDA tensor"
        )
    _devmm.torch_route(chosen)
    try:
        torch.cuda.memory.change_current_allocator(_pluggable_allocator(_devmm.TORCH_MALLOC_SYMBOL))
    except RuntimeError as e:
        _devmm.torch_unroute()
        raise RuntimeError(f"PyTorch refused devmm's allocator: {e}") from e
    _served.update((mr.device.index, mr) for mr in chosen)
    return TorchInstaller(chosen)


#: The resource serving each CUDA ordinal, by ``install`` or ``mem_pool``:
#: PyTorch's entry points are told a device, never a pool, so a device has
#: one resource for the life of the process.
_served: dict[int, DeviceMemoryResource] = {}


#: PyTorch's allocators over devmm's entry points, by allocation symbol,
#: each made once.
_allocators: "dict[str, torch.cuda.memory.CUDAPluggableAllocator]" = {}


def _pluggable_allocator(malloc_symbol: str) -> "torch.cuda.memory.CUDAPluggableAllocator":
    """PyTorch's allocator over devmm's entry points, made once per
    allocation entry point: ``install``'s throws ``std::bad_alloc`` when out
    of memory (PyTorch would wrap a NULL in a tensor), and the one every
    :func:`mem_pool` shares returns NULL, which PyTorch's caching allocator
    answers by freeing its cached blocks and trying again; it calls the
    pool's entry points with its lock held, which they know."""
    if malloc_symbol not in _allocators:
        pool = malloc_symbol == _devmm.TORCH_POOL_MALLOC_SYMBOL
        free_symbol = _devmm.TORCH_POOL_FREE_SYMBOL if pool else _devmm.TORCH_FREE_SYMBOL
        allocator = torch.cuda.memory.CUDAPluggableAllocator(_devmm.__file__, malloc_symbol, free_symbol)
        if not pool:
            # PyTorch's allocator hands a block's other streams
            # (Tensor.record_stream, NCCL) to this hook; without it a free
            # would not wait for them. A MemPool's caching allocator tracks
            # them itself.
            hook = getattr(ctypes.CDLL(_devmm.__file__), _devmm.TORCH_RECORD_STREAM_SYMBOL)
            allocator.allocator().set_record_stream_fn(ctypes.cast(hook, ctypes.c_void_p).value)
        _allocators[malloc_symbol] = allocator
    return _allocators[malloc_symbol]


def mem_pool(mr: DeviceMemoryResource) -> "torch.cuda.MemPool":
    """A ``torch.cuda.MemPool`` whose memory comes from ``mr`` through
    devmm's allocator entry points, for ``with torch.cuda.use_mem_pool(pool):``
    blocks; unlike :func:`install` it works after PyTorch has started CUDA,
    and PyTorch's own allocator keeps serving everything outside the blocks.

    PyTorch caches the pool's blocks and returns them through the pool's
    allocator, so a tensor made in a block goes back to ``mr`` when PyTorch
    releases its memory (``torch.cuda.empty_cache()``, or the pool's end),
    even after the block has ended; :func:`memory_stats` counts the pool's
    blocks. Out of memory, the pool's entry point returns NULL, so PyTorch
    frees the blocks it caches and tries again before it raises
    ``torch.OutOfMemoryError``. PyTorch tells the entry points only the device, so a device has
    one devmm resource: ``ValueError`` for another one than ``install`` or an
    earlier pool gave it, or for memory that is not CUDA memory;
    ``RuntimeError`` when PyTorch has no CUDA. PyTorch calls the entry points
    with its allocator lock held, which a thread holding the GIL may wait for:
    ``ValueError`` for a chain that runs Python code (a resource written in
    Python, a ``FailureCallbackAdaptor``), which would wait for the GIL there.

    Examples
    --------
    >>> import devmm.integrations.torch
    >>> devmm.integrations.torch.mem_pool("cuda:0")
    Traceback (most recent call last):
        ...
    TypeError: mem_pool needs a devmm memory resource, not str

    With a CUDA device and a CUDA build of PyTorch:

    >>> import torch
    >>> from devmm.mrs.cuda import CudaAsyncMemoryResource
    >>> pool = devmm.integrations.torch.mem_pool(CudaAsyncMemoryResource("cuda:0"))  # doctest: +SKIP
    >>> with torch.cuda.use_mem_pool(pool):  # doctest: +SKIP
    ...     x = torch.zeros(1000, device="cuda")  # allocated by devmm
    """
    if not isinstance(mr, DeviceMemoryResource):
        raise TypeError(f"mem_pool needs a devmm memory resource, not {type(mr).__name__}")
    if not torch.cuda.is_available():
        raise RuntimeError(
            f"PyTorch {torch.__version__} has no usable CUDA (torch.cuda.is_available() is "
            f"False), so it has no caching allocator to hold a MemPool over {mr!r}; run on a "
            f"machine with a CUDA GPU and a CUDA build of PyTorch"
        )
    ordinal = mr.device.index
    if not _devmm.torch_serve(mr) and _served.get(ordinal) is not mr:
        raise ValueError(
            f"CUDA device {ordinal} is served to PyTorch by {_served.get(ordinal)!r} already, "
            f"and PyTorch's allocator entry points are told the device, not the pool: use that "
            f"resource for every devmm MemPool on the device, not {mr!r}"
        )
    _served[ordinal] = mr
    return torch.cuda.MemPool(_pluggable_allocator(_devmm.TORCH_POOL_MALLOC_SYMBOL).allocator())


def _statistics(device: Any) -> tuple[int, tuple[int, int, int, int, int, int]]:
    ordinal = _ordinal(device)
    stats = _devmm.torch_statistics(ordinal)
    if stats is None:
        raise ValueError(
            f"devmm does not serve PyTorch on CUDA device {ordinal}; "
            f"devmm.integrations.torch.install a resource for it first"
        )
    return ordinal, stats


def memory_stats(device: Any = None) -> "OrderedDict[str, int]":
    """``torch.cuda.memory_stats(device)``'s keys for PyTorch's blocks in
    devmm: ``allocated_bytes.all.*``, ``reserved_bytes.all.*`` and
    ``active_bytes.all.*`` (``current``, ``peak``, ``allocated``, ``freed``;
    the three agree, devmm keeps no cache of its own), ``allocation.all.*``
    and ``active.all.*`` (``current``, ``allocated``, ``freed``), and
    ``num_ooms``. When the resource has a pool of its own below it
    (``CudaAsyncMemoryResource``, behind any adaptors),
    ``reserved_bytes.all.current`` and ``.peak`` are that pool's reserved
    bytes and their high-water mark, as PyTorch's caching allocator reports
    what it holds; another pool below devmm (rmm's, the device's default
    one) is not seen here.

    ``device``: ``None`` (PyTorch's current device), an ordinal,
    ``"cuda:1"``, a ``torch.device`` or a ``Device``. Returns an
    ``OrderedDict`` of ints.

    Raises
    ------
    RuntimeError
        devmm does not serve PyTorch (``install`` was not called).

    Examples
    --------
    >>> from devmm.integrations.torch import memory_stats, reset_peak_memory_stats
    >>> stats = memory_stats(0)  # after install(...)  # doctest: +SKIP
    >>> stats["allocated_bytes.all.current"]  # doctest: +SKIP
    0
    """
    ordinal, (current, peak, total, allocations, deallocations, ooms) = _statistics(device)
    stats: dict[str, int] = {"num_ooms": ooms, "num_alloc_retries": 0}
    for name in ("allocated_bytes", "reserved_bytes", "active_bytes"):
        stats[f"{name}.all.current"] = current
        stats[f"{name}.all.peak"] = peak
        stats[f"{name}.all.allocated"] = total
        stats[f"{name}.all.freed"] = total - current
    pool = _devmm.torch_pool_statistics(ordinal)
    if pool is not None:
        stats["reserved_bytes.all.current"] = pool.reserved_bytes
        stats["reserved_bytes.all.peak"] = pool.reserved_high_bytes
    for name in ("allocation", "active"):
        stats[f"{name}.all.current"] = allocations - deallocations
        stats[f"{name}.all.allocated"] = allocations
        stats[f"{name}.all.freed"] = deallocations
    return OrderedDict(sorted(stats.items()))


def reset_peak_memory_stats(device: Any = None) -> None:
    """Starts a new peak for PyTorch's blocks on ``device``: the peak keys
    of :func:`memory_stats` become the bytes live now. ``device`` is spelled
    as for :func:`memory_stats`.

    Examples
    --------
    >>> from devmm.integrations.torch import memory_stats, reset_peak_memory_stats
    >>> reset_peak_memory_stats(0)  # after install(...)  # doctest: +SKIP
    >>> memory_stats(0)["allocated_bytes.all.peak"] == memory_stats(0)["allocated_bytes.all.current"]  # doctest: +SKIP
    True
    """
    ordinal, _ = _statistics(device)
    _devmm.torch_reset_peak(ordinal)
