# Typing of `rocm.py`: calling the class returns the core's runtime (the
# metaclass's `__call__`), which mypy reads only from a `__new__`.
from typing import ClassVar, final

from .._devmm import DeviceRuntime
from .base import _PlatformRuntimeType

__all__ = ["HipRuntime"]

@final  # subclassing is a TypeError (base.py)
class HipRuntime(metaclass=_PlatformRuntimeType):
    name: ClassVar[str]
    def __new__(cls) -> DeviceRuntime: ...  # type: ignore[misc]  # not a subtype: the core's runtime
