"""ctypes mirrors of the DLPack 1.1 header (``dlpack.h``): what a Python
caller needs to read a devmm capsule (``PyCapsule_GetPointer`` then
``DLManagedTensorVersioned.from_address``). The core's ``repr(C)`` structs
are checked against the real header by a C compiler; these follow the same
field order and types."""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # What a function-pointer field reads as; typeshed has it in `_ctypes` only.
    from _ctypes import CFuncPtr

__all__ = [
    "DLPACK_FLAG_BITMASK_IS_COPIED",
    "DLPACK_FLAG_BITMASK_READ_ONLY",
    "DLPACK_VERSION",
    "DLDataType",
    "DLDevice",
    "DLManagedTensor",
    "DLManagedTensorDeleter",
    "DLManagedTensorVersioned",
    "DLManagedTensorVersionedDeleter",
    "DLPackVersion",
    "DLTensor",
]

#: ``(DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION)``: the newest version devmm
#: stamps into a versioned capsule.
DLPACK_VERSION: tuple[int, int] = (1, 1)

#: ``DLManagedTensorVersioned.flags``: consumers must not write.
DLPACK_FLAG_BITMASK_READ_ONLY = 1 << 0
#: ``DLManagedTensorVersioned.flags``: the producer copied the data.
DLPACK_FLAG_BITMASK_IS_COPIED = 1 << 1


class DLPackVersion(ctypes.Structure):
    """``DLPackVersion``: the version a versioned capsule is stamped with."""

    # What the fields read as on an instance; the layout is ``_fields_``.
    major: int
    minor: int

    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLDevice(ctypes.Structure):
    """``DLDevice``: the ``DLDeviceType`` code (a C enum, 32 bits) and ordinal."""

    device_type: int
    device_id: int

    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    """``DLDataType``: ``(code, bits, lanes)``, four bytes."""

    code: int
    bits: int
    lanes: int

    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    """``DLTensor``: the non-owning description (strides in elements)."""

    data: int | None
    device: DLDevice
    ndim: int
    dtype: DLDataType
    shape: ctypes._Pointer[ctypes.c_int64]
    strides: ctypes._Pointer[ctypes.c_int64]
    byte_offset: int

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    """The legacy (pre-1.0) managed tensor, in a ``"dltensor"`` capsule."""

    dl_tensor: DLTensor
    manager_ctx: int | None
    deleter: CFuncPtr


class DLManagedTensorVersioned(ctypes.Structure):
    """The DLPack 1.x managed tensor, in a ``"dltensor_versioned"`` capsule;
    ``flags`` comes before ``dl_tensor``, as the header orders them."""

    version: DLPackVersion
    manager_ctx: int | None
    deleter: CFuncPtr
    flags: int
    dl_tensor: DLTensor


# Each deleter takes a pointer to its own struct, so the fields can only be
# set once the classes exist.
DLManagedTensorDeleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensorVersionedDeleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))

DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", DLManagedTensorDeleter),
]
DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", DLManagedTensorVersionedDeleter),
    ("flags", ctypes.c_uint64),
    ("dl_tensor", DLTensor),
]
