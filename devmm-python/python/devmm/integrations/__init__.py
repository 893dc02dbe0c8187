"""Arrows that provide a devmm resource to another library's allocator.
Each is an explicit ``install(mr)`` returning an :class:`Installer` whose
``uninstall()`` (or the end of its ``with`` block) restores the prior state;
importing never changes anything.

``numpy`` (NEP 49), ``cupy`` (``cupy.cuda.set_allocator``), ``numba`` (an
external memory manager), ``rmm`` (rmm's per-device resource), ``torch``
(``CUDAPluggableAllocator``) and ``dask`` (a resource stack on every
worker)."""

from .._devmm import NumpyInstaller as _NumpyInstaller
from ._installer import Installer

# The NEP 49 installer is native; it keeps the same contract.
Installer.register(_NumpyInstaller)

__all__ = ["Installer"]
