"""``devmm.OutOfMemoryError``, the figures an out-of-memory failure carries.

The exception is raised by devmm's one conversion of core errors to Python
exceptions (``devmm-python/src/error.rs``), which fills its fields from the
core's out-of-memory figures; this module only gives it its Python shape."""

from __future__ import annotations

import functools
from typing import Any

from ._core.device import Device
from .statistics import PoolStatistics

__all__ = ["OutOfMemoryError"]


class OutOfMemoryError(MemoryError):
    """An allocation failed for want of memory (a ``MemoryError``).

    ``device`` and ``nbytes`` are what was asked, ``chain`` the resources
    the request went through (outermost first), ``pool`` the figures of the
    pool it was asked from when the resource has a pool of its own
    (``CudaAsyncMemoryResource``, ``HipAsyncMemoryResource``: a
    ``devmm.statistics.PoolStatistics``, whose ``fragmentation_bytes`` is
    what the pool holds but could not give the request; ``None`` for other
    resources), and ``largest_fit`` the largest request that would succeed
    now when the resource can tell (a ``LimitingAdaptor`` knows its
    remaining budget; a driver does not know its largest free block:
    ``None``).

    devmm raises it; code handling it reads the fields. ``except
    MemoryError`` catches it too.

    Examples
    --------
    >>> import devmm
    >>> from devmm.mrs.cpu import MallocMemoryResource
    >>> limited = devmm.LimitingAdaptor(MallocMemoryResource(), limit_bytes=64)
    >>> try:
    ...     limited.allocate(100, devmm.runtime_for("cpu").default_stream("cpu"))
    ... except devmm.OutOfMemoryError as error:
    ...     print(error.nbytes, error.device, error.largest_fit, error.pool)
    ...     print(error.chain)
    100 cpu:0 64 None
    LimitingAdaptor -> MallocMemoryResource(device=cpu:0, alignment=64)
    """

    device: Device
    nbytes: int
    chain: str
    pool: PoolStatistics | None
    largest_fit: int | None

    def __init__(
        self,
        message: str,
        *,
        device: Device,
        nbytes: int,
        chain: str,
        pool: PoolStatistics | None = None,
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
