"""Stream creation flags."""

import enum

__all__ = ["StreamFlags"]


class StreamFlags(enum.IntEnum):
    """How a created stream orders against the legacy default stream, as
    rmm's ``CudaStreamFlags``: ``SYNC_DEFAULT`` streams synchronize with it,
    ``NON_BLOCKING`` ones do not. Pass one (or its int value) to
    :class:`devmm.StreamPool`.

    Examples
    --------
    >>> import devmm
    >>> list(devmm.StreamFlags)
    [<StreamFlags.SYNC_DEFAULT: 0>, <StreamFlags.NON_BLOCKING: 1>]
    >>> devmm.StreamFlags(1) is devmm.StreamFlags.NON_BLOCKING
    True
    """

    SYNC_DEFAULT = 0
    NON_BLOCKING = 1
