"""Each module's ``__all__`` lists exactly its public names."""

import importlib
import types

import pytest

import devmm

# devmm.integrations (and its Installer base) is the framework-bridges
# work's; its own tests pin its names.
MODULES = ["devmm", "devmm.testing", "devmm.mrs", "devmm.mrs.cpu", "devmm.integrations.numpy"]


@pytest.mark.parametrize("name", MODULES)
def test_all_lists_exactly_the_public_names(name: str) -> None:
    module = importlib.import_module(name)
    listed = set(module.__all__)
    assert len(listed) == len(module.__all__), "no name twice"
    public = {
        n for n, v in vars(module).items()
        # Submodules appear as attributes once imported anywhere; only
        # those the module lists are part of its interface.
        if not n.startswith("_") and not (isinstance(v, types.ModuleType) and n not in listed)
    }
    assert public == {n for n in listed if not n.startswith("__")}
    for exported in listed:
        assert hasattr(module, exported), f"{name}.{exported} is listed but missing"


def test_the_extension_exports_what_the_package_re_exports() -> None:
    from devmm import _devmm

    def in_python(value: object) -> bool:
        # A class the package defines in one of its Python modules (an enum, a
        # dataclass); the extension's classes name the package itself as their module.
        name = getattr(value, "__module__", "")
        return name.startswith("devmm.") and name != _devmm.__name__

    package = {
        n for n in devmm.__all__
        if not isinstance(getattr(devmm, n), types.ModuleType) and not in_python(getattr(devmm, n))
    }
    assert package <= set(dir(_devmm))
    assert in_python(devmm.StreamFlags) and not in_python(devmm.Stream)
