"""NumPy's data allocator (NEP 49) backed by a devmm resource.

``install(mr)`` makes NumPy allocate array data through ``mr`` in the
current context and returns a :class:`NumpyInstaller`; its ``uninstall()``,
or the end of its ``with`` block, restores the previous handler."""

from .._devmm import NumpyInstaller
from .._devmm import install_numpy_handler as install

__all__ = ["NumpyInstaller", "install"]
