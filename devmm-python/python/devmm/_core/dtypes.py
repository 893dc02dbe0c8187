"""``DType``: DLPack's ``(code, bits, lanes)`` element type, as a frozen,
slotted dataclass, and the standard names as module constants
(``float32``, ``bool_``, ...).

The core (``devmm::DType``) checks the triple, names it, sizes it and reads
every other spelling of a dtype (``DType.from_any``); this module gives it
the seed's shape, so ``dataclasses.replace``, ``fields``, ``asdict`` and
``match`` work on dtypes."""

from __future__ import annotations

import dataclasses
from typing import Any

from .._devmm import _check_dtype, _dtype_from_any, _dtype_itemsize, _dtype_name, _parse_dtype

__all__ = [
    "DType",
    "bfloat16",
    "bool_",
    "complex64",
    "complex128",
    "float16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
]


@dataclasses.dataclass(frozen=True, slots=True, repr=False)
class DType:
    """An element type, spelled as DLPack's ``DLDataType``: any
    ``DLDataTypeCode`` up to DLPack 1.1's float8/float6/float4 codes (17),
    ``bits`` per lane and ``lanes`` per element. A code devmm does not know,
    zero bits or lanes, or a field out of range is a ``ValueError`` naming
    the field.

    ``DType(code, bits, lanes=1)``; :meth:`from_string` reads a standard
    name and :meth:`from_any` every spelling ``devmm.empty`` accepts. The
    standard dtypes are constants of ``devmm._core.dtypes`` (``float32``,
    ``bool_``, ...). ``itemsize`` is the bytes per element, ``name`` the
    standard name.

    Raises
    ------
    ValueError
        An unknown code, zero bits or lanes, or a field out of range.

    Examples
    --------
    >>> import devmm
    >>> f32 = devmm.DType(2, 32)  # DLPack's kDLFloat, 32 bits
    >>> f32, f32.itemsize, f32.name
    (DType('float32'), 4, 'float32')
    >>> f32 == devmm.DType.from_string("float32")
    True
    >>> devmm.DType(2, 0)
    Traceback (most recent call last):
        ...
    ValueError: ...
    """

    code: int
    bits: int
    lanes: int = 1

    def __post_init__(self) -> None:
        code, bits, lanes = _check_dtype(self.code, self.bits, self.lanes)
        object.__setattr__(self, "code", code)
        object.__setattr__(self, "bits", bits)
        object.__setattr__(self, "lanes", lanes)

    @classmethod
    def from_string(cls, name: str) -> DType:
        """Parses a standard name: ``"float32"``, ``"bfloat16"``,
        ``"complex64"``, ``"bool"``, the float8/float6/float4 names; another
        name is a ``ValueError`` listing them.

        Examples
        --------
        >>> import devmm
        >>> devmm.DType.from_string("bfloat16")
        DType('bfloat16')
        >>> devmm.DType.from_string("float33")
        Traceback (most recent call last):
            ...
        ValueError: unknown dtype string "float33": expected one of bool, int8, ...
        """
        return cls(*_parse_dtype(name))

    @classmethod
    def from_any(cls, obj: Any) -> DType:
        """The dtype ``obj`` names: a ``DType``; a name (``"float32"``,
        ``"float8_e4m3fn"``); a NumPy dtype, scalar type (``np.float32``) or
        type code (``"f4"``, ``"<i8"``); an object with NumPy's ``kind`` and
        ``itemsize``; an ``ml_dtypes`` type; a ``torch`` dtype. Anything
        else is a ``TypeError``, a type DLPack cannot express a
        ``ValueError``. Returns the ``DType``.

        Examples
        --------
        >>> import numpy as np
        >>> import devmm
        >>> devmm.DType.from_any(np.float32), devmm.DType.from_any("<i8")
        (DType('float32'), DType('int64'))
        >>> devmm.DType.from_any(np.dtype("uint8")) == devmm.DType.from_any("uint8")
        True
        >>> devmm.DType.from_any(3.5)
        Traceback (most recent call last):
            ...
        TypeError: argument 'obj': cannot interpret 3.5 as a dtype: ...
        """
        if isinstance(obj, DType):
            return obj
        return _dtype_from_any(obj)

    @property
    def itemsize(self) -> int:
        """Bytes per element (rounded up for the sub-byte float4/float6 types)."""
        return _dtype_itemsize(self)

    @property
    def name(self) -> str:
        """The standard name, or a ``Float32x4``-style spelling for vector types."""
        return _dtype_name(self)

    def __str__(self) -> str:
        return _dtype_name(self)

    def __repr__(self) -> str:
        return f"DType({_dtype_name(self)!r})"


bool_ = DType.from_string("bool")
int8 = DType.from_string("int8")
int16 = DType.from_string("int16")
int32 = DType.from_string("int32")
int64 = DType.from_string("int64")
uint8 = DType.from_string("uint8")
uint16 = DType.from_string("uint16")
uint32 = DType.from_string("uint32")
uint64 = DType.from_string("uint64")
float16 = DType.from_string("float16")
float32 = DType.from_string("float32")
float64 = DType.from_string("float64")
bfloat16 = DType.from_string("bfloat16")
complex64 = DType.from_string("complex64")
complex128 = DType.from_string("complex128")
