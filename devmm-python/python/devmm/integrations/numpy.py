"""NumPy's data allocator (NEP 49) backed by a devmm resource.

``install(mr)`` makes NumPy allocate array data through ``mr`` in the
current context and returns an :class:`~devmm.integrations.Installer`; its
``uninstall()``, or the end of its ``with`` block, restores the previous
handler. Arrays allocated meanwhile keep using (and keep alive) ``mr``
until they are freed."""

from __future__ import annotations

from .. import _devmm
from .._devmm import DeviceMemoryResource
from ._installer import Installer

__all__ = ["install"]


def install(mr: DeviceMemoryResource) -> Installer:
    """Installs ``mr`` as NumPy's data allocator (NEP 49) in the current
    context. ``mr`` must serve host memory (``ValueError`` otherwise), and
    must not allocate through NumPy's handler itself (a cycle).

    ``mr``: a ``DeviceMemoryResource`` on a host device (``cpu``,
    ``cuda_host``, ``cuda_managed``, ...). Returns the
    :class:`~devmm.integrations.Installer` that restores NumPy's previous
    handler (also at the end of its ``with`` block).

    Raises
    ------
    ValueError
        ``mr`` serves device memory, or allocates through NumPy's handler.

    Examples
    --------
    >>> import numpy as np
    >>> import devmm
    >>> import devmm.integrations.numpy
    >>> from devmm.mrs.cpu import MallocMemoryResource
    >>> stats = devmm.StatisticsAdaptor(MallocMemoryResource())
    >>> with devmm.integrations.numpy.install(stats):
    ...     arr = np.ones(1000)
    >>> stats.total_bytes >= 8000
    True
    >>> from devmm.testing import RecordingMemoryResource
    >>> devmm.integrations.numpy.install(RecordingMemoryResource("cuda:0"))
    Traceback (most recent call last):
        ...
    ValueError: ...
    """
    handler = _devmm._numpy_handler_over(mr)
    previous = _devmm._set_numpy_handler(handler)
    return Installer(
        "NumPy",
        lambda: _devmm._set_numpy_handler(previous),
        mr=mr,
        is_current=lambda: _devmm._numpy_handler() is handler,
    )
