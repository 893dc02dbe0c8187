"""``devmm.OutOfMemoryError`` and the pool figures it carries.

The exception is raised by devmm's one conversion of core errors to Python
exceptions (``devmm-python/src/error.rs``), which fills its fields from the
core's out-of-memory figures; this module only gives it its Python shape."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from ._core.device import Device

__all__ = ["OutOfMemoryError", "PoolFigures"]


@dataclasses.dataclass(frozen=True)
class PoolFigures:
    """A memory pool's figures when an allocation from it failed: bytes the
    pool holds from the device and bytes of those handed out; the difference
    (``unused_bytes``) is what it holds but could not give the request."""

    reserved_bytes: int
    used_bytes: int

    @property
    def unused_bytes(self) -> int:
        """Reserved bytes not in use."""
        return max(self.reserved_bytes - self.used_bytes, 0)


class OutOfMemoryError(MemoryError):
    """An allocation failed for want of memory (a ``MemoryError``).

    ``device`` and ``nbytes`` are what was asked, ``chain`` the resources
    the request went through (outermost first), ``pool`` the figures of the
    pool it was asked from (``None`` while devmm's resources draw from each
    device's default pool, whose figures no error reports yet), and
    ``largest_fit`` the largest request that would succeed now when the
    resource can tell (a ``LimitingAdaptor`` knows its remaining budget; a
    driver does not know its largest free block: ``None``)."""

    device: Device
    nbytes: int
    chain: str
    pool: PoolFigures | None
    largest_fit: int | None

    def __init__(
        self,
        message: str,
        *,
        device: Device,
        nbytes: int,
        chain: str,
        pool: PoolFigures | None = None,
        largest_fit: int | None = None,
    ) -> None:
        super().__init__(message)
        self.device = device
        self.nbytes = nbytes
        self.chain = chain
        self.pool = pool
        self.largest_fit = largest_fit

    def __reduce__(self) -> tuple[Any, ...]:
        # The fields are keyword-only, so pickling (multiprocessing, Dask)
        # passes them as a partial's keywords, and the state (notes) as is.
        rebuild = functools.partial(
            type(self),
            device=self.device,
            nbytes=self.nbytes,
            chain=self.chain,
            pool=self.pool,
            largest_fit=self.largest_fit,
        )
        return (rebuild, self.args, self.__dict__)
