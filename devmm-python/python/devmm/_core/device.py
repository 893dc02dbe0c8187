"""``Device``: a device type and an ordinal, as a frozen, slotted dataclass.

The core (``devmm::Device``) checks the fields and parses and formats
device strings; this module gives it the seed's
shape, so ``dataclasses.replace``, ``fields``, ``asdict`` and ``match``
work on devices. ``DeviceType`` is the ``enum.IntEnum`` the extension
builds from the core's device types."""

from __future__ import annotations

import builtins
import dataclasses
import threading
from types import TracebackType
from .._devmm import DeviceActivation, DeviceType, _check_device, _device_str, _parse_device

__all__ = ["Device", "DeviceType"]


# The constructor is written out so its parameters carry the types it
# accepts (a type's name or its DLPack code); the fields keep the checked
# values.
@dataclasses.dataclass(frozen=True, slots=True, init=False)
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
    read it."""

    type: DeviceType
    index: int = 0

    def __init__(self, type: DeviceType | int | str, index: int = 0) -> None:
        # The fields keep what the core read, so Device(2) == Device("cuda").
        ty, checked = _check_device(type, index)
        object.__setattr__(self, "type", ty)
        object.__setattr__(self, "index", checked)

    @classmethod
    def from_string(cls, text: str) -> Device:
        """Parses ``"cpu"``, ``"cuda:1"``, ``"rocm:0"``, ``"cuda_host"`` (the
        ordinal defaults to 0); anything else is a ``ValueError`` saying the
        form expected."""
        return cls(*_parse_device(text))

    def __str__(self) -> str:
        """``"cuda:1"``: the form ``from_string`` reads back."""
        return _device_str(self)

    def __dlpack_device__(self) -> tuple[int, int]:
        """``(int(type), index)``: the device in DLPack's numbering. (A
        tensor in pinned or managed memory reports device id 0 instead, as
        ``dlpack.h`` asks of producers.)"""
        return (int(self.type), self.index)

    def __enter__(self) -> Device:
        """Activates the device on this thread, through its runtime's
        ``activate_device``; blocks nest, and each restores on exit the
        device active before it."""
        # Imported here: the runtimes' discovery imports this module.
        from .._runtimes import runtime_for

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
        if not entered:
            raise RuntimeError(
                f"leaving a `with {self}:` block this thread did not enter: a device block ends "
                "on the thread that entered it"
            )
        if entered[-1][0] != self:
            raise RuntimeError(
                f"leaving a `with {self}:` block while `with {entered[-1][0]}:` is the innermost "
                "this thread entered: device blocks end in reverse order"
            )
        _, activation = entered.pop()
        activation.__exit__(exc_type, exc, traceback)


# Each thread's entered device blocks, innermost last: the native active
# device is per thread, and so is what a block restores.
_ENTERED = threading.local()


def _entered() -> list[tuple[Device, DeviceActivation]]:
    stack: list[tuple[Device, DeviceActivation]] | None = getattr(_ENTERED, "stack", None)
    if stack is None:
        stack = _ENTERED.stack = []
    return stack
