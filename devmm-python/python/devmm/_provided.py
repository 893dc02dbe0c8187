"""What ``devmm.integrations`` hands a library so that it calls back into
devmm: CuPy's allocator, rmm's resource. The ``devmm.mrs`` resources over
those libraries refuse to consume one, since allocating through it would
be a cycle. It lives below both packages so that neither imports the
other."""

from __future__ import annotations

import threading
from typing import Any, TypeVar

__all__ = ["is_provided", "provide", "provided_class", "withdraw"]

_T = TypeVar("_T", bound=type)

# Told apart by identity: rmm's resources are its own CallbackMemoryResource
# objects (a subclass marking them would need a class per rmm module, and a
# stand-in's class may not be subclassable), and not all are hashable.
_objects: list[Any] = []
_classes: list[type] = []
_lock = threading.Lock()


def provided_class(cls: _T) -> _T:
    """Marks every instance of ``cls`` as devmm's (a class decorator)."""
    with _lock:
        _classes.append(cls)
    return cls


def provide(obj: Any) -> None:
    """Marks ``obj`` as devmm's while it is installed in its library."""
    with _lock:
        _objects.append(obj)


def withdraw(obj: Any) -> None:
    """Undoes :func:`provide` for ``obj`` (uninstalled)."""
    with _lock:
        _objects[:] = [kept for kept in _objects if kept is not obj]


def is_provided(obj: Any) -> bool:
    """Whether ``obj`` is one devmm provides to a library (so consuming it
    would allocate through devmm again)."""
    with _lock:
        return any(obj is kept for kept in _objects) or isinstance(obj, tuple(_classes))
