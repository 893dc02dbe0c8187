"""The shipped layout policies as frozen dataclasses, as the seed declares them.

The policies are native classes (``devmm._devmm``), so that ``devmm.RowMajor()``
stays one native call on the allocation path. This module gives each the
dataclass description of its constructor's parameters and what a frozen
dataclass derives from its fields: ``dataclasses.fields``, ``replace``
(and ``copy.replace`` from Python 3.13),
``asdict``, ``astuple``, ``__match_args__``, the field-wise ``repr``, equality
and hash, pickling and copying by the fields (in every protocol), and the refusal to assign
(``dataclasses.FrozenInstanceError``). ``replace`` and unpickling call the
constructor, so the core validates the values.
"""

import dataclasses
import inspect
from typing import Any, NoReturn

from .._devmm import Aligned, ColMajor, DeviceOptimal, Layout, LayoutPolicy, Permuted, RowMajor


def _refuse_assignment(self: object, name: str, value: object) -> NoReturn:
    raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


def _refuse_deletion(self: object, name: str) -> NoReturn:
    raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")


def _reduce(self: Any) -> tuple[type, tuple[Any, ...]]:
    """The class and the constructor's arguments for an equal policy (pickle
    and copy, in every protocol)."""
    return type(self), tuple(getattr(self, field.name) for field in dataclasses.fields(self))


def _reduce_ex(self: object, protocol: int) -> Any:
    """A Python subclass of ``LayoutPolicy`` pickles as from protocol 2 in
    every protocol: ``copyreg.__newobj__`` of its class, then its state (the
    older protocols' reconstruction calls ``object.__new__``, which a native
    base refuses)."""
    return object.__reduce_ex__(self, max(protocol, 2))


# What a frozen dataclass derives from its fields, taken from the record
# (from Python 3.13 also ``__replace__``, ``copy.replace``'s hook).
_DERIVED = ("__dataclass_fields__", "__dataclass_params__", "__match_args__", "__repr__", "__eq__", "__hash__")
_DERIVED_IF_ANY = ("__replace__",)


def _frozen_dataclass(cls: type, defaults: object = None) -> None:
    """Declares the parameters of ``cls``'s constructor as its frozen dataclass
    fields, each optional one defaulting to its value in ``defaults`` (an
    instance made with the required arguments only), so the defaults are the
    constructor's own."""
    fields: list[Any] = []
    for parameter in inspect.signature(cls).parameters.values():
        if parameter.default is inspect.Parameter.empty:
            fields.append((parameter.name, Any))
        else:
            default = getattr(defaults, parameter.name)
            fields.append((parameter.name, Any, dataclasses.field(default=default)))
    record = dataclasses.make_dataclass(cls.__name__, fields, frozen=True)
    for name in _DERIVED:
        setattr(cls, name, getattr(record, name))
    for name in _DERIVED_IF_ANY:
        if hasattr(record, name):
            setattr(cls, name, getattr(record, name))
    setattr(cls, "__reduce__", _reduce)
    setattr(cls, "__setattr__", _refuse_assignment)
    setattr(cls, "__delattr__", _refuse_deletion)


setattr(LayoutPolicy, "__reduce_ex__", _reduce_ex)
for _policy in (RowMajor, ColMajor, DeviceOptimal, Permuted):
    _frozen_dataclass(_policy)
_frozen_dataclass(Aligned, Aligned(RowMajor()))
del _policy

# A resolved layout is frozen too, and compares, hashes and spells itself by
# its fields, the policy included, as the seed's dataclass does. Its fields are
# not the seed's (it carries its shape and element size: ADR 0016), so it is
# not declared a dataclass: ``replace`` would call a constructor of other
# parameters.
_LAYOUT_FIELDS = ("shape", "strides", "itemsize", "required_nbytes", "base_alignment", "policy")
_layout_record = dataclasses.make_dataclass("Layout", _LAYOUT_FIELDS, frozen=True)
for _name in ("__repr__", "__eq__", "__hash__"):
    setattr(Layout, _name, getattr(_layout_record, _name))
setattr(Layout, "__setattr__", _refuse_assignment)
setattr(Layout, "__delattr__", _refuse_deletion)
del _name
