"""``Device``: a device type and an ordinal, as a frozen, slotted dataclass.

The core (``devmm::Device``) checks the fields and parses and formats
device strings; this module gives it the seed's
shape, so ``dataclasses.replace``, ``fields``, ``asdict`` and ``match``
work on devices. ``DeviceType`` is the ``enum.IntEnum`` the extension
builds from the core's device types."""

from __future__ import annotations

# `builtins.type`: in the class body the `type` field shadows the builtin.
import builtins
import dataclasses
import threading
from types import TracebackType
from typing import TYPE_CHECKING, Self

from .._devmm import DeviceActivation, DeviceType, _check_device, _device_str, _parse_device, runtime_for

__all__ = ["Device", "DeviceType"]


@dataclasses.dataclass(frozen=True, slots=True)
class Device:
    """One device: a ``DeviceType`` and an ordinal (``index``, default 0).

    ``type`` may be given as a ``DeviceType``, its DLPack code or its name
    (``"cuda"``) and is kept as the member; a negative ordinal, or one past
    DLPack's ``int32``, is a ``ValueError``. Equal devices hash alike, so
    devices key dictionaries.

    ``with device:`` makes it the thread's active device in its runtime's
    native sense (``cudaSetDevice``, ``hipSetDevice``) for the block, for
    code that reads that state (rmm, HIP, kernel launches): the seed's
    convenience. devmm's own calls take their device explicitly and do not
    read it.

    ``Device(type, index=0)``: ``type`` is a ``DeviceType``, its DLPack
    code (``2``) or its name (``"cuda"``); ``index`` an ``int``.
    :meth:`from_string` reads ``"cuda:1"``.

    Raises
    ------
    ValueError
        An unknown type, or an ordinal below 0 or past ``int32``.

    Examples
    --------
    >>> import devmm
    >>> devmm.Device("cuda", 1)
    Device(type=<DeviceType.CUDA: 2>, index=1)
    >>> devmm.Device(2) == devmm.Device.from_string("cuda:0")
    True
    >>> str(devmm.Device(devmm.DeviceType.ROCM, 1)), devmm.Device("cpu").__dlpack_device__()
    ('rocm:1', (1, 0))
    >>> devmm.Device("cpu", -1)
    Traceback (most recent call last):
        ...
    ValueError: index must be a device index from 0 to 2147483647; -1 is out of range
    """

    type: DeviceType
    index: int = 0

    if TYPE_CHECKING:
        # What the constructor accepts, for type checkers: the generated
        # one runs, and `__post_init__` converts (so subclasses get it too).
        def __init__(self, type: DeviceType | int | str, index: int = 0) -> None: ...

    def __post_init__(self) -> None:
        # The fields keep what the core read, so Device(2) == Device("cuda").
        ty, index = _check_device(self.type, self.index)
        object.__setattr__(self, "type", ty)
        object.__setattr__(self, "index", index)

    @classmethod
    def from_string(cls, s: str) -> Device:
        """Parses ``"cpu"``, ``"cuda:1"``, ``"rocm:0"``, ``"cuda_host"`` (the
        ordinal defaults to 0): ``TYPE`` or ``TYPE:ORDINAL``, ``TYPE`` one of
        ``cpu``, ``cuda``, ``cuda_host``, ``rocm``, ``rocm_host``,
        ``cuda_managed``. Returns the ``Device``.

        Raises
        ------
        ValueError
            Any other text, saying the form expected.

        Examples
        --------
        >>> import devmm
        >>> devmm.Device.from_string("cuda:1")
        Device(type=<DeviceType.CUDA: 2>, index=1)
        >>> devmm.Device.from_string("cpu").index
        0
        >>> devmm.Device.from_string("gpu")
        Traceback (most recent call last):
            ...
        ValueError: unknown device type "gpu": expected TYPE or TYPE:ORDINAL, ...
        """
        return cls(*_parse_device(s))

    def __str__(self) -> str:
        """``"cuda:1"``: the form ``from_string`` reads back."""
        return _device_str(self)

    def __dlpack_device__(self) -> tuple[int, int]:
        """``(int(type), index)``: the device in DLPack's numbering. (A
        tensor in pinned or managed memory reports device id 0 instead, as
        ``dlpack.h`` asks of producers.)"""
        return (int(self.type), self.index)

    def __enter__(self) -> Self:
        """Activates the device on this thread, through its runtime's
        ``activate_device``; blocks nest, and each gives back on exit the
        device active before it (where that device has a context to go back
        to: the runtime creates none). The native active device is the
        thread's, shared by every task and generator on it, so a block must
        not stay open across ``await`` or ``yield``."""
        activation = runtime_for(self).activate_device(self)
        activation.__enter__()
        _entered().append((self, activation))
        return self

    def __exit__(
        self,
        exc_type: builtins.type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        entered = _entered()
        # The innermost block this thread entered for this device, if any.
        at = next((i for i in reversed(range(len(entered))) if entered[i][0] == self), None)
        if at == len(entered) - 1:
            entered.pop()[1].__exit__(exc_type, exc, traceback)
            return
        if at is None:
            problem = (
                f"leaving a `with {self}:` block this thread did not enter: a device block ends "
                "on the thread that entered it"
            )
        else:
            # Interleaved blocks (held across await or yield): this one ends
            # now, restoring what it found, so none stays open for good.
            problem = (
                f"leaving a `with {self}:` block while `with {entered[-1][0]}:` is the innermost "
                "this thread entered: device blocks end in reverse order, so none may stay open "
                "across await or yield"
            )
            entered.pop(at)[1].__exit__(exc_type, exc, traceback)
        if exc is None:
            raise RuntimeError(problem)
        # The block's own exception is what its caller handles.
        exc.add_note(problem)


# Each thread's entered device blocks, innermost last: the native active
# device is per thread, and so is what a block restores.
_ENTERED = threading.local()


def _entered() -> list[tuple[Device, DeviceActivation]]:
    stack: list[tuple[Device, DeviceActivation]] | None = getattr(_ENTERED, "stack", None)
    if stack is None:
        stack = _ENTERED.stack = []
    return stack
