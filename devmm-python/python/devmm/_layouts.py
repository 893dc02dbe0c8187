"""The shipped layout policies as frozen dataclasses, as the seed declares them.

The policies are native classes (``devmm._devmm``), so that ``devmm.RowMajor()``
stays one native call on the allocation path. This module gives each the
dataclass description of its constructor's parameters (``dataclasses.fields``,
``replace``, ``asdict``, ``astuple``, ``is_dataclass``, ``__match_args__``) and a
frozen dataclass's refusal to assign (``dataclasses.FrozenInstanceError``).
``replace`` calls the constructor, so the core validates the new value.
"""

import dataclasses
import inspect
from typing import Any, NoReturn

from ._devmm import Aligned, ColMajor, DeviceOptimal, Permuted, RowMajor


def _refuse_assignment(self: object, name: str, value: object) -> NoReturn:
    raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


def _refuse_deletion(self: object, name: str) -> NoReturn:
    raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")


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
    for name in ("__dataclass_fields__", "__dataclass_params__", "__match_args__"):
        setattr(cls, name, getattr(record, name))
    setattr(cls, "__setattr__", _refuse_assignment)
    setattr(cls, "__delattr__", _refuse_deletion)


for _policy in (RowMajor, ColMajor, DeviceOptimal, Permuted):
    _frozen_dataclass(_policy)
_frozen_dataclass(Aligned, Aligned(RowMajor()))
del _policy
