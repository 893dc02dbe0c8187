"""ctypes mirrors of the DLPack 1.1 header (``dlpack.h``), and of the C
exchange API table of DLPack 1.3: what a Python caller needs to read a
devmm capsule (``PyCapsule_GetPointer`` then
``DLManagedTensorVersioned.from_address``) or call a type's
``__dlpack_c_exchange_api__`` table as a C consumer would. The core's ``repr(C)`` structs
are checked against the real header by a C compiler; these follow the same
field order and types."""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # What a function-pointer field reads as; typeshed has it in `_ctypes` only.
    from _ctypes import CFuncPtr

__all__ = [
    "DLPACK_FLAG_BITMASK_IS_COPIED",
    "DLPACK_FLAG_BITMASK_READ_ONLY",
    "DLPACK_EXCHANGE_API_VERSION",
    "DLPACK_VERSION",
    "DLDataType",
    "DLDevice",
    "DLManagedTensor",
    "DLManagedTensorDeleter",
    "DLManagedTensorVersioned",
    "DLManagedTensorVersionedDeleter",
    "DLPackExchangeAPI",
    "DLPackExchangeAPIHeader",
    "DLPackVersion",
    "DLTensor",
]

#: ``(DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION)``: the newest version devmm
#: stamps into a versioned capsule.
DLPACK_VERSION: tuple[int, int] = (1, 1)

#: The version of the ``DLPackExchangeAPI`` table devmm publishes.
DLPACK_EXCHANGE_API_VERSION: tuple[int, int] = (1, 3)

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


class DLPackExchangeAPIHeader(ctypes.Structure):
    """``DLPackExchangeAPIHeader``: the table's version and an older table."""

    version: DLPackVersion
    prev_api: int | None

    _fields_ = [("version", DLPackVersion), ("prev_api", ctypes.c_void_p)]


_OUT_MANAGED = ctypes.POINTER(ctypes.POINTER(DLManagedTensorVersioned))


class DLPackExchangeAPI(ctypes.Structure):
    """``DLPackExchangeAPI``: the table a ``"dlpack_exchange_api"`` capsule
    points at (``type(x).__dlpack_c_exchange_api__``). The entries taking
    Python objects keep the GIL and raise the error they set, as
    ``ctypes.PYFUNCTYPE`` calls do; the allocator releases it, as a C
    consumer may call it, and reports through its ``SetError`` callback."""

    header: DLPackExchangeAPIHeader
    managed_tensor_allocator: CFuncPtr
    managed_tensor_from_py_object_no_sync: CFuncPtr
    managed_tensor_to_py_object_no_sync: CFuncPtr
    dltensor_from_py_object_no_sync: CFuncPtr
    current_work_stream: CFuncPtr

    #: ``SetError(error_ctx, kind, message)``, the allocator's error callback.
    SetError = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)

    _fields_ = [
        ("header", DLPackExchangeAPIHeader),
        (
            "managed_tensor_allocator",
            ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(DLTensor), _OUT_MANAGED, ctypes.c_void_p, SetError),
        ),
        (
            "managed_tensor_from_py_object_no_sync",
            ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, _OUT_MANAGED),
        ),
        (
            "managed_tensor_to_py_object_no_sync",
            ctypes.PYFUNCTYPE(
                ctypes.c_int, ctypes.POINTER(DLManagedTensorVersioned), ctypes.POINTER(ctypes.c_void_p)
            ),
        ),
        (
            "dltensor_from_py_object_no_sync",
            ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(DLTensor)),
        ),
        (
            "current_work_stream",
            ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p)),
        ),
    ]

    @classmethod
    def of(cls, producer_type: type[Any]) -> DLPackExchangeAPI:
        """The table ``producer_type.__dlpack_c_exchange_api__`` points at."""
        get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
        get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        address = get_pointer(producer_type.__dlpack_c_exchange_api__, b"dlpack_exchange_api")
        return cls.from_address(address)
