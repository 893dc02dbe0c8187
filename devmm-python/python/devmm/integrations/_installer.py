"""What every provide arrow returns, and the rules they share: the
installer restores exactly the state it replaced, refuses to restore it
while something installed later is current, and a resource that allocates
through a library cannot be installed into that library."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from types import TracebackType
from typing import Any, Callable, Literal

__all__ = ["Installer", "consumed_libraries", "refuse_cycle", "resource_chain"]


class Installer:
    """A library allocating through a devmm resource, from ``install(mr)``
    until :meth:`uninstall` (or the end of its ``with`` block), as the seed
    makes it: ``Installer(library, restore)``, where ``restore()`` puts the
    library's previous state back.

    ``uninstall()`` calls ``restore`` once: calls made while it runs (from
    another thread, or from ``restore`` itself) and after it return at
    once. Given ``is_current``, which tells whether the library still holds
    what ``install`` put there, ``uninstall()`` raises ``RuntimeError``
    while it does not (something installed later is current; uninstall
    that first) and stays installed, as it does when ``restore`` raises
    (the library could not go back). ``mr`` is the resource installed, if
    one is.

    ``Installer(library, restore, *, mr=None, is_current=None)``;
    ``installed`` says whether it has not been undone yet.

    Examples
    --------
    >>> from devmm.integrations import Installer
    >>> installer = Installer("demo", lambda: print("restored"))
    >>> with installer:
    ...     installer.installed
    True
    restored
    >>> installer.installed, installer.uninstall()  # a second uninstall does nothing
    (False, None)
    """

    def __init__(
        self,
        library: str,
        restore: Callable[[], None],
        *,
        mr: Any = None,
        is_current: Callable[[], bool] | None = None,
    ) -> None:
        self.library = library
        self.mr = mr
        self._restore: Callable[[], None] | None = restore
        self._is_current = is_current
        self._lock = threading.Lock()

    @property
    def installed(self) -> bool:
        """Whether the library still allocates through devmm because of this installer."""
        return self._restore is not None

    def uninstall(self) -> None:
        """Restores the library's previous state (the first call only).

        Raises
        ------
        RuntimeError
            Something installed later is current (uninstall that first), or
            the library cannot go back; the installer stays installed.

        Examples
        --------
        >>> import devmm
        >>> import devmm.integrations.numpy
        >>> from devmm.mrs.cpu import MallocMemoryResource
        >>> installer = devmm.integrations.numpy.install(MallocMemoryResource())
        >>> installer.uninstall()
        >>> installer.installed
        False
        """
        # Taken under the lock, so two threads cannot both restore; restore
        # (library code, which may call back into this installer) runs
        # outside it.
        with self._lock:
            restore, is_current = self._restore, self._is_current
            if restore is None:
                return
            if is_current is not None and not is_current():
                through = "" if self.mr is None else f" through {self.mr!r}"
                raise RuntimeError(
                    f"uninstall {self.library} installers in reverse order of install: "
                    f"{self.library}'s allocator was replaced after this installer made it "
                    f"allocate{through}; uninstall the later one first"
                )
            # What the closures hold (a handler, the previous allocator) is
            # no longer this installer's to keep alive.
            self._restore = self._is_current = None
        try:
            restore()
        except BaseException:
            # The library could not go back (Numba after it made a
            # context): it still allocates through devmm.
            with self._lock:
                self._restore, self._is_current = restore, is_current
            raise

    def __enter__(self) -> Installer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Literal[False]:
        self.uninstall()
        return False

    def __repr__(self) -> str:
        state = "installed" if self.installed else "uninstalled"
        return f"{type(self).__name__}(library={self.library!r}, {state})"


#: The libraries one arrow installs into: rmm's arrow serves hipMM too
#: (rmm on CUDA, hipMM on ROCm; one ``rmm.mr`` API).
_SERVED: dict[str, tuple[str, ...]] = {"rmm": ("rmm", "hipmm")}
#: How the libraries spell themselves, for messages.
_SPELLED = {"cupy": "CuPy", "numpy": "NumPy", "numba": "Numba", "torch": "PyTorch"}


def resource_chain(mr: Any) -> Iterator[Any]:
    """``mr`` and every resource below it, followed through ``upstream``
    (each once, so a looped chain ends)."""
    seen: set[int] = set()
    while mr is not None and id(mr) not in seen:
        seen.add(id(mr))
        yield mr
        mr = getattr(mr, "upstream", None)


def consumed_libraries(mr: Any) -> set[str]:
    """The libraries ``mr`` allocates through: those of every resource in its
    adaptor chain (followed through ``upstream``) that consumes one."""
    return {library for r in resource_chain(mr) if isinstance(library := getattr(r, "consumes", None), str)}


def refuse_cycle(library: str, mr: Any, forbidden: type | tuple[type, ...] = ()) -> None:
    """Raises ``ValueError`` when ``mr`` allocates through ``library``:
    installing it into ``library`` would make the library call itself. A
    resource in the chain allocates through it when it says so
    (``consumes``; for ``"rmm"`` hipMM counts too) or is an instance of
    ``forbidden`` (the classes a caller knows to allocate through it)."""
    served = _SERVED.get(library, (library,))
    spelled = _SPELLED.get(library, library)
    for current in resource_chain(mr):
        if getattr(current, "consumes", None) in served or isinstance(current, forbidden):
            raise ValueError(
                f"installing {mr!r} into {spelled} would create an allocation cycle: "
                f"{type(current).__name__} in its chain allocates through {spelled} already "
                f"(consume and provide for one library at once); wrap another resource"
            )
