"""Managed memory advice."""

import enum

__all__ = ["Advice"]


class Advice(enum.IntEnum):
    """What :func:`devmm.advise` tells the driver about managed memory, with
    the values of ``cudaMemoryAdvise`` / ``hipMemoryAdvise``. ``devmm.advise``
    also takes the lower-case name (``"set_read_mostly"``) or the int.

    Examples
    --------
    >>> import devmm
    >>> devmm.Advice.SET_READ_MOSTLY, int(devmm.Advice.SET_ACCESSED_BY)
    (<Advice.SET_READ_MOSTLY: 1>, 5)
    >>> devmm.Advice["SET_PREFERRED_LOCATION"] == 3
    True
    """

    SET_READ_MOSTLY = 1
    UNSET_READ_MOSTLY = 2
    SET_PREFERRED_LOCATION = 3
    UNSET_PREFERRED_LOCATION = 4
    SET_ACCESSED_BY = 5
    UNSET_ACCESSED_BY = 6
