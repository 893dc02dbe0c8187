"""``Installer`` at the seed's module path (``devmm.integrations._support``);
it is ``devmm.integrations.Installer``."""

from ._installer import Installer

__all__ = ["Installer"]
