"""NumPy's data-allocator API (NEP 49) at the seed's module path
(``devmm._nep49``): ``load_api()`` gives the running NumPy's
``PyDataMem_GetHandler`` / ``PyDataMem_SetHandler`` as a ``Nep49Api``.

They are the extension's: devmm's binding reaches them through NumPy's
C-API table and builds its handlers in Rust (``devmm::interop``), so the
seed's ctypes mirror of the handler struct and its NumPy version guard have
no Python counterpart here (docs/adr/0016)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

from . import _devmm
from ._devmm import RuntimeUnavailableError

__all__ = ["Nep49Api", "load_api"]


class Nep49Api:
    """The running NumPy's NEP 49 entry points, as the seed makes it:
    ``module`` is ``numpy``, ``get_handler`` and ``set_handler`` the
    callables that ``get_handler()`` and ``set_handler(capsule)`` call
    (``load_api()`` passes the binding's)."""

    def __init__(
        self, module: ModuleType, get_handler: Callable[[], Any], set_handler: Callable[[Any], Any]
    ) -> None:
        self.module = module
        self._get_handler = get_handler
        self._set_handler = set_handler

    def get_handler(self) -> Any:
        """The handler capsule (``mem_handler``) current in this context."""
        return self._get_handler()

    def set_handler(self, capsule: Any) -> Any:
        """Makes ``capsule`` (a ``mem_handler`` capsule) the current handler;
        returns the one it replaces."""
        return self._set_handler(capsule)


def load_api() -> Nep49Api:
    """The NEP 49 entry points of the running NumPy; ``RuntimeUnavailableError``
    (an ``ImportError``) where NumPy does not import."""
    try:
        numpy = importlib.import_module("numpy")
    except ImportError as err:
        raise RuntimeUnavailableError("numpy is not importable; install numpy to use its NEP 49 allocator") from err
    api = Nep49Api(numpy, _devmm._numpy_handler, _devmm._set_numpy_handler)
    api.get_handler()  # the binding checks here that this NumPy has NEP 49
    return api
