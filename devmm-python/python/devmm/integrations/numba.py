"""Numba (numba-cuda) allocating device memory through devmm.

:class:`DevmmEMMPlugin` is a Numba external memory manager (EMM plugin,
interface version 1): ``memalloc`` allocates a :class:`devmm.DeviceBuffer`
from devmm's current resource for the context's device at each
allocation (``devmm.set_current_memory_resource`` or a
``using_memory_resource`` block choose it), and pinned host memory comes
from devmm's pinned resource. Select it before Numba makes a context,
either with ``NUMBA_CUDA_MEMORY_MANAGER=devmm.integrations.numba`` (Numba
imports this module and uses ``_numba_memory_manager``) or with
``install()``.

Numba cannot swap the memory manager of a context it has made, so
``uninstall()`` raises ``RuntimeError`` once a context used the plugin."""

from __future__ import annotations

import abc
import ctypes
import importlib
import threading
import weakref
from typing import Any

from .._core.device import Device
from .._devmm import (
    CudaRuntimeMemoryResource,
    DeviceBuffer,
    DeviceMemoryResource,
    DeviceType,
    LimitingAdaptor,
    LoggingAdaptor,
    RuntimeUnavailableError,
    StatisticsAdaptor,
    Stream,
    TraceAdaptor,
    TrackingAdaptor,
    get_current_memory_resource,
    runtime_for,
    wait_for_allocation,
)
from ._installer import Installer
from ._support import library_streams

__all__ = ["DevmmEMMPlugin", "install"]


def _numba_cuda_module() -> Any:
    """``numba.cuda``, whose EMM plugin interface the plugin is built on:
    the one place this module imports Numba (a test may stand another
    module in here)."""
    try:
        return importlib.import_module("numba.cuda")
    except ImportError as e:
        raise RuntimeUnavailableError(
            f"numba is not importable ({e}); devmm's Numba plugin needs numba-cuda: install it"
        ) from e


_plugin_class_cache: type | None = None
#: One token per install not yet undone, the latest last.
_installs: list[object] = []
# Held while the class is made: threads asking at once all get the one class.
_plugin_lock = threading.Lock()

#: The plugin class (Numba's classes are its bases): made on first use by
#: the module ``__getattr__``; declared here for type checkers.
DevmmEMMPlugin: Any


def _plugin_class() -> Any:
    """The plugin class, made on first use: its bases are Numba's, so
    importing this module imports no Numba (``DevmmEMMPlugin`` and Numba's
    ``_numba_memory_manager`` hook are served by the module ``__getattr__``)."""
    global _plugin_class_cache
    with _plugin_lock:
        if _plugin_class_cache is None:
            _plugin_class_cache = _make_plugin_class(_numba_cuda_module())
        return _plugin_class_cache


def __getattr__(name: str) -> Any:
    if name in ("DevmmEMMPlugin", "_numba_memory_manager"):
        return _plugin_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _make_plugin_class(numba_cuda: Any) -> type:
    class Plugin(
        numba_cuda.GetIpcHandleMixin,
        numba_cuda.HostOnlyCUDAMemoryManager,
        metaclass=abc.ABCMeta,  # Numba's own; named so type checkers see it
    ):
        """A Numba EMM plugin over devmm: each allocation uses devmm's
        current resource for the context's device.

        Device frees go through Numba's pending-deallocation queue, so
        ``defer_cleanup()`` (inherited) defers them as it defers Numba's own;
        ``reset()`` frees everything still live. IPC handles of devmm's
        ``cudaMalloc`` memory come from ``DeviceBuffer.ipc_handle()``
        (``cudaIpcGetMemHandle``, the handle ``cuIpcGetMemHandle`` gives),
        shaped as Numba's own ``IpcHandle``; ``get_ipc_handle`` refuses
        devmm memory from any other allocator (``cudaMallocAsync``, the
        default) with a ``ValueError``.

        Numba makes it (``DevmmEMMPlugin(context=...)``) for each context
        once :func:`install` selected it; user code does not call its
        methods.

        Examples
        --------
        >>> from devmm.integrations.numba import DevmmEMMPlugin
        >>> DevmmEMMPlugin(context=None).interface_version
        1
        >>> from numba import cuda  # doctest: +SKIP
        >>> devmm.integrations.numba.install()  # doctest: +SKIP
        >>> cuda.device_array(1000).gpu_data  # doctest: +SKIP
        <numba.cuda.cudadrv.driver.AutoFreePointer object at 0x...>
        """

        #: Contexts that used this plugin (counted by ``initialize``).
        contexts_made = 0

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._live: dict[int, DeviceBuffer] = {}
            self._pinned: DeviceMemoryResource | None = None
            self._stream: Stream | None = None

        @property
        def interface_version(self) -> int:
            return 1

        @property
        def device(self) -> Device:
            """The devmm device of Numba's context."""
            return Device(DeviceType.CUDA, int(self.context.device.id))

        def _resource(self) -> DeviceMemoryResource:
            return get_current_memory_resource(self.device)

        def _memory_info(self) -> tuple[int, int]:
            # A Python resource that cannot tell (None) gets its device's figures.
            info = self._resource().available_memory()
            return info if info is not None else runtime_for(self.device).memory_info(self.device)

        def initialize(self) -> None:
            """Numba's call when a context starts using the plugin: counts
            the context (``contexts_made``), after which ``uninstall()``
            raises.

            Examples
            --------
            >>> from devmm.integrations.numba import DevmmEMMPlugin
            >>> before = DevmmEMMPlugin.contexts_made
            >>> DevmmEMMPlugin(context=None).initialize()  # doctest: +SKIP
            >>> DevmmEMMPlugin.contexts_made >= before
            True
            """
            Plugin.contexts_made += 1
            # Numba flushes pending frees past a share of the device's
            # memory; a base without Numba's queue (a stand-in's) has none.
            deallocations = getattr(self, "deallocations", None)
            if deallocations is not None:
                _free, total = self._memory_info()
                deallocations.memory_capacity = total

        def _context(self) -> Any:
            """The context as a pointer holds it: weakly, as Numba's own
            manager's pointers do, where it takes weak references."""
            try:
                return weakref.proxy(self.context)
            except TypeError:
                return self.context

        def memalloc(self, size: int) -> Any:
            """Numba's device allocation: a ``DeviceBuffer`` of ``size``
            bytes from devmm's current resource for the context's device,
            wrapped in Numba's ``AutoFreePointer``.

            Examples
            --------
            >>> from devmm.integrations.numba import DevmmEMMPlugin
            >>> from numba import cuda
            >>> context = cuda.current_context()  # doctest: +SKIP
            >>> context.memalloc(1024).size  # through DevmmEMMPlugin.memalloc  # doctest: +SKIP
            1024
            """
            # The EMM interface carries no stream: Numba's allocations are
            # on the device's default stream (handle 0), as rmm's plugin's.
            if self._stream is None:
                self._stream = library_streams(self.device)(0)
            try:
                buffer = DeviceBuffer(size, mr=self._resource(), stream=self._stream)
            except MemoryError:
                # As Numba's own manager: the frees its queue holds back go
                # first, then one more try.
                deallocations = getattr(self, "deallocations", None)
                if not deallocations or deallocations.is_disabled:
                    raise
                deallocations.clear()
                buffer = DeviceBuffer(size, mr=self._resource(), stream=self._stream)
            key = buffer.ptr
            if key:
                self._live[key] = buffer

            def release() -> None:
                deallocations = getattr(self, "deallocations", None)
                if deallocations is None:
                    self._free(key)  # no queue to defer the free to
                else:
                    deallocations.add_item(self._free, key, size)

            return numba_cuda.MemoryPointer(self._context(), ctypes.c_void_p(key), size, finalizer=release)

        def _free(self, key: int) -> None:
            buffer = self._live.pop(key, None)
            if buffer is not None:
                buffer.free()

        def get_ipc_handle(self, memory: Any) -> Any:
            """Numba's ``IpcHandle`` for ``memory``: for devmm's
            ``cudaMalloc`` memory, the handle of its allocation from
            ``DeviceBuffer.ipc_handle()`` (``cudaIpcGetMemHandle``) with the
            offset of ``memory`` in it, as Numba's own manager shapes it;
            memory Numba was handed from elsewhere goes to Numba's own
            ``cuIpcGetMemHandle``. devmm memory from any other allocator is
            a ``ValueError``.

            Examples
            --------
            >>> from devmm.integrations.numba import DevmmEMMPlugin
            >>> from numba import cuda
            >>> cuda.device_array(16).get_ipc_handle()  # doctest: +SKIP
            Traceback (most recent call last):
                ...
            ValueError: ... allocates with cudaMallocAsync ...
            """
            address = int(memory.device_pointer)
            buffer = self._owner_of(address)
            if buffer is not None:
                why = _legacy_ipc_refusal(buffer.mr)
                if why is not None:
                    raise ValueError(
                        f"Numba's get_ipc_handle on {buffer.device} (address {address:#x}): {why}; "
                        f"cuIpcGetMemHandle shares only cudaMalloc memory. Allocate the arrays to "
                        f"share from CudaRuntimeMemoryResource(device, async_alloc=False) (cudaMalloc), "
                        f"e.g. in a devmm.using_memory_resource(...) block around them"
                    )
                # The allocation's handle, as Numba's own manager makes it for
                # the base of the allocation holding `memory`.
                handle = buffer.ipc_handle()
                return numba_cuda.IpcHandle(
                    memory,
                    _numba_ipc_mem_handle(handle.handle),
                    memory.size,
                    self.context.device.get_device_identity(),
                    offset=address - buffer.ptr,
                )
            # Memory Numba was handed from elsewhere (as_cuda_array): the
            # driver serves it or says why not, as for Numba's own allocations.
            return super().get_ipc_handle(memory)

        def _owner_of(self, address: int) -> DeviceBuffer | None:
            """The live allocation of this plugin that holds `address` (a
            view's pointer lies inside its allocation)."""
            for start, buffer in self._live.items():
                if start <= address < start + buffer.size:
                    return buffer
            return None

        def memhostalloc(self, size: int, mapped: bool = False, portable: bool = False, wc: bool = False) -> Any:
            """Numba's pinned host allocation: devmm's
            ``CudaPinnedMemoryResource`` serves it, unless ``mapped`` or
            ``wc`` asks for driver flags only Numba's own path sets.

            Examples
            --------
            >>> from devmm.integrations.numba import DevmmEMMPlugin
            >>> from numba import cuda
            >>> cuda.pinned_array(16).nbytes  # through DevmmEMMPlugin.memhostalloc  # doctest: +SKIP
            128
            """
            if mapped or wc:
                # Mapped and write-combined memory need driver flags devmm's
                # pinned resource does not take: Numba's own path serves them.
                return super().memhostalloc(size, mapped=mapped, portable=portable, wc=wc)
            if self._pinned is None:
                self._pinned = importlib.import_module("devmm.mrs.cuda").CudaPinnedMemoryResource()
            buffer = DeviceBuffer(size, mr=self._pinned)
            # Numba's host code writes the block at once, and a block from a
            # stream-ordered pool may still be read by work queued before it
            # (devmm::wait_for_allocation says when it waits).
            wait_for_allocation(buffer)
            # The address as an int, as Numba's own memhostalloc passes it:
            # NumPy reads it through Numba's buffer protocol, which takes
            # only an int (a ctypes pointer crashes the process there).
            return numba_cuda.PinnedMemory(self._context(), buffer.ptr, size, owner=buffer)

        def get_memory_info(self) -> Any:
            """``MemoryInfo(free, total)`` of the current resource
            (``available_memory()``), or of the device when it cannot tell.

            Examples
            --------
            >>> from devmm.integrations.numba import DevmmEMMPlugin
            >>> from numba import cuda
            >>> free, total = cuda.current_context().get_memory_info()  # doctest: +SKIP
            """
            free, total = self._memory_info()
            return numba_cuda.MemoryInfo(free=free, total=total)

        def reset(self) -> None:
            """Numba's reset: frees every allocation still live.

            Examples
            --------
            >>> from devmm.integrations.numba import DevmmEMMPlugin
            >>> from numba import cuda
            >>> cuda.current_context().reset()  # doctest: +SKIP
            """
            super().reset()
            live, self._live = self._live, {}
            for buffer in live.values():
                buffer.free()

    Plugin.__name__ = Plugin.__qualname__ = "DevmmEMMPlugin"
    return Plugin


#: Adaptors that hand out their upstream's pointers unchanged: what their
#: upstream allocated is what the driver sees.
_PASS_THROUGH = (StatisticsAdaptor, LimitingAdaptor, LoggingAdaptor, TrackingAdaptor, TraceAdaptor)


def _numba_ipc_mem_handle(data: bytes) -> Any:
    """The driver's 64 handle bytes as the ``CUipcMemHandle`` of the CUDA
    bindings Numba uses (what its ``cuIpcGetMemHandle`` returns). Written
    at the struct's address: some releases of the bindings do not expose
    its ``reserved`` member."""
    binding = importlib.import_module("numba.cuda.cudadrv.driver").binding
    handle = binding.CUipcMemHandle()
    if len(data) != 64:
        raise ValueError(f"a CUDA IPC memory handle is 64 bytes, not {len(data)}")
    ctypes.memmove(handle.getPtr(), data, 64)
    return handle


def _legacy_ipc_refusal(mr: DeviceMemoryResource) -> str | None:
    """Why memory from `mr` cannot be shared with ``cuIpcGetMemHandle``
    (which takes only ``cudaMalloc`` memory), or ``None`` when it can:
    through pass-through adaptors down to a ``CudaRuntimeMemoryResource``
    that is not stream-ordered."""
    chain = repr(mr)
    inner = mr
    while isinstance(inner, _PASS_THROUGH):
        inner = inner.upstream
    if not isinstance(inner, CudaRuntimeMemoryResource):
        return f"the resource chain {chain} hands out memory devmm did not allocate with cudaMalloc"
    if inner.stream_ordered:
        return f"the resource chain {chain} allocates with cudaMallocAsync (stream-ordered, from a memory pool)"
    return None


def install() -> Installer:
    """Makes Numba's next contexts allocate through devmm's current resource
    for their device (:class:`DevmmEMMPlugin`); returns the
    :class:`~devmm.integrations.Installer` that restores Numba's previous
    memory manager. Must run before Numba makes a context: once one used
    the plugin, ``uninstall()`` raises ``RuntimeError``.

    Raises
    ------
    RuntimeUnavailableError
        numba-cuda is not importable.

    Examples
    --------
    >>> import devmm.integrations.numba
    >>> installer = devmm.integrations.numba.install()  # before Numba's first context
    >>> installer.installed
    True
    >>> installer.uninstall()  # no context used it yet, so Numba can go back
    """
    numba_cuda = _numba_cuda_module()
    driver = numba_cuda.cudadrv.driver
    plugin = _plugin_class()
    previous = driver._memory_manager
    contexts_before = plugin.contexts_made
    numba_cuda.set_memory_manager(plugin)
    # Installs of the one plugin class nest: only the latest is current.
    token = object()
    _installs.append(token)

    def restore() -> None:
        made = plugin.contexts_made - contexts_before
        if made:
            raise RuntimeError(
                f"Numba made {made} context(s) with devmm's memory manager and cannot swap a "
                f"context's manager; it stays until the process exits"
            )
        driver._memory_manager = previous
        _installs.remove(token)

    return Installer(
        "Numba",
        restore,
        is_current=lambda: driver._memory_manager is plugin and _installs[-1] is token,
    )
