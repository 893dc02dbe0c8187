"""``Device``: a device type and an ordinal, as a frozen, slotted dataclass.

The core (``devmm::Device``) checks the fields and parses and formats
device strings; this module gives it the seed's
shape, so ``dataclasses.replace``, ``fields``, ``asdict`` and ``match``
work on devices. ``DeviceType`` is the ``enum.IntEnum`` the extension
builds from the core's device types."""

from __future__ import annotations

import dataclasses

from .._devmm import DeviceType, _check_device, _device_str, _parse_device

__all__ = ["Device", "DeviceType"]


@dataclasses.dataclass(frozen=True, slots=True)
class Device:
    """One device: a ``DeviceType`` and an ordinal (``index``, default 0).

    ``type`` may be given as a ``DeviceType``, its DLPack code or its name
    (``"cuda"``) and is kept as the member; a negative ordinal, or one past
    DLPack's ``int32``, is a ``ValueError``. Equal devices hash alike, so
    devices key dictionaries."""

    type: DeviceType
    index: int = 0

    def __post_init__(self) -> None:
        # The fields keep what the core read, so Device(2) == Device("cuda").
        ty, index = _check_device(self.type, self.index)
        object.__setattr__(self, "type", ty)
        object.__setattr__(self, "index", index)

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
