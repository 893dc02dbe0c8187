"""``Tensor``, ``empty`` and ``empty_like`` at the seed's module path
(``devmm._core.tensor``); they are the extension's."""

from .._devmm import Tensor, empty, empty_like

__all__ = ["Tensor", "empty", "empty_like"]
