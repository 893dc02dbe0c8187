"""Arrows that provide a devmm resource to another library's allocator.
Each is an explicit ``install(mr)`` returning an :class:`Installer` whose
``uninstall()`` (or the end of its ``with`` block) restores the prior state;
importing never changes anything, and never needs the library: it is
imported when ``install`` (or a class that derives from it) is used.

``numpy`` (NEP 49), ``cupy`` (``cupy.cuda.set_allocator``), ``numba`` (an
external memory manager) and ``rmm`` (rmm's per-device resource) are
imported with this package, as the seed's are; ``torch``
(``CUDAPluggableAllocator``) and ``dask`` (a resource stack on every
worker) import their framework, so they are imported by name."""

from . import cupy, numba, numpy, rmm
from ._installer import Installer

__all__ = ["Installer", "cupy", "numba", "numpy", "rmm"]
