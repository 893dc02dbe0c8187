"""What every provide arrow returns, and the rules they share: the
installer restores exactly the state it replaced, refuses to restore it
while something installed later is current, and a resource that allocates
through a library cannot be installed into that library."""

from __future__ import annotations

import abc
from types import TracebackType
from typing import Any, Callable, Literal

__all__ = ["Installer", "LibraryInstaller", "consumed_libraries", "refuse_cycle"]


class Installer(abc.ABC):
    """A library allocating through a devmm resource, from ``install(mr)``
    until :meth:`uninstall` (or the end of its ``with`` block).

    ``uninstall()`` restores the state ``install`` found and is idempotent;
    where the library cannot go back (something installed later is still
    current, or the library never lets go once it has allocated) it raises
    ``RuntimeError`` and stays installed.
    """

    #: The library this installer points at devmm (``"numpy"``, ``"cupy"``, ...).
    library: str = ""

    @property
    @abc.abstractmethod
    def installed(self) -> bool:
        """Whether the library still allocates through devmm because of this installer."""

    @abc.abstractmethod
    def uninstall(self) -> None:
        """Restores the library's previous allocator."""

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


class LibraryInstaller(Installer):
    """An installer over one piece of a library's global state: ``is_current``
    tells whether the library still holds what ``install`` put there, and
    ``restore`` puts the previous value back."""

    def __init__(
        self,
        library: str,
        mr: Any,
        is_current: Callable[[], bool],
        restore: Callable[[], None],
    ) -> None:
        self.library = library
        self.mr = mr
        self._is_current = is_current
        self._restore: Callable[[], None] | None = restore

    @property
    def installed(self) -> bool:
        return self._restore is not None

    def uninstall(self) -> None:
        if self._restore is None:
            return
        if not self._is_current():
            raise RuntimeError(
                f"uninstall {self.library} installers in reverse order of install: "
                f"{self.library}'s allocator was replaced after this installer made it "
                f"allocate through {self.mr!r}; uninstall the later one first"
            )
        self._restore()
        self._restore = None

    def __repr__(self) -> str:
        state = "installed" if self.installed else "uninstalled"
        return f"<{type(self).__name__} {self.library} -> {self.mr!r} ({state})>"


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
            f"{mr!r} allocates through {library}; installing it as {library}'s allocator "
            f"is a cycle (consume and provide for one library at once); wrap another resource"
        )
