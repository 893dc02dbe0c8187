"""What every provide arrow returns, and the rules they share: the
installer restores exactly the state it replaced, refuses to restore it
while something installed later is current, and a resource that allocates
through a library cannot be installed into that library."""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Any, Callable, Literal

__all__ = ["Installer", "consumed_libraries", "refuse_cycle"]


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
        """Restores the library's previous state (the first call only)."""
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


def consumed_libraries(mr: Any) -> set[str]:
    """The libraries ``mr`` allocates through: those of every resource in its
    adaptor chain (followed through ``upstream``) that consumes one."""
    found: set[str] = set()
    seen: set[int] = set()
    while mr is not None and id(mr) not in seen:
        seen.add(id(mr))
        library = getattr(mr, "consumes", None)
        if isinstance(library, str):
            found.add(library)
        mr = getattr(mr, "upstream", None)
    return found


def refuse_cycle(library: str, mr: Any) -> None:
    """Raises ``ValueError`` when ``mr`` allocates through ``library``:
    installing it into ``library`` would make the library call itself."""
    if library in consumed_libraries(mr):
        raise ValueError(
            f"installing {mr!r} into {library} would create an allocation cycle: it allocates "
            f"through {library} already (consume and provide for one library at once); wrap "
            f"another resource"
        )
