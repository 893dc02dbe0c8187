"""Each module's ``__all__`` lists exactly its public names."""

import __future__
import importlib
import inspect
import types
import typing

import pytest

import devmm

# Each imports on a machine without CUDA, ROCm, CuPy, rmm or Numba.
MODULES = [
    "devmm",
    "devmm.testing",
    "devmm.mrs",
    "devmm.mrs.cpu",
    "devmm.mrs.cuda",
    "devmm.mrs.rocm",
    "devmm.integrations",
    "devmm.integrations.numpy",
]


@pytest.mark.parametrize("name", MODULES)
def test_all_lists_exactly_the_public_names(name: str) -> None:
    module = importlib.import_module(name)
    listed = set(module.__all__)
    assert len(listed) == len(module.__all__), "no name twice"
    # What the listed functions' annotations name is imported so that
    # typing.get_type_hints resolves them (as the seed's modules import it):
    # a name of the module's globals, not one of its own.
    annotated = [
        hint
        for exported in listed
        if inspect.isfunction(getattr(module, exported, None))
        for hint in typing.get_type_hints(getattr(module, exported)).values()
    ]
    public = {
        n for n, v in vars(module).items()
        # Submodules appear as attributes once imported anywhere; only
        # those the module lists are part of its interface.
        if not n.startswith("_") and not (isinstance(v, types.ModuleType) and n not in listed)
        and not (n not in listed and (v is __future__.annotations or any(v is h for h in annotated)))
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
    # The value dataclasses are defined in Python over the extension's checks.
    dataclasses = {"Device", "DType"}
    assert not dataclasses & set(dir(_devmm))
    assert {getattr(devmm, n).__module__ for n in dataclasses} == {"devmm._core.device", "devmm._core.dtypes"}


def test_the_integrations_import_with_their_package_and_without_their_libraries() -> None:
    import subprocess
    import sys

    # A fresh interpreter, so that no other test has imported a submodule.
    script = (
        "import sys, devmm.integrations as i; "
        "assert all(hasattr(i, m) for m in ('cupy', 'numba', 'numpy', 'rmm')); "
        "assert not {'cupy', 'numba', 'rmm'} & set(sys.modules); print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


# The modules of public callables whose signatures users read (the extension's
# classes spell theirs in a `text_signature`, which must name real defaults).
SIGNED_MODULES = ["devmm", "devmm.testing", "devmm.mrs", "devmm.mrs.cpu", "devmm.mrs.cuda", "devmm.mrs.rocm"]


def test_no_public_signature_shows_an_ellipsis_default() -> None:
    import inspect

    checked = set()
    for name in SIGNED_MODULES:
        module = importlib.import_module(name)
        for exported in module.__all__:
            value = getattr(module, exported)
            if not (inspect.isclass(value) or inspect.isroutine(value)) or value in checked:
                continue
            checked.add(value)
            try:
                signature = inspect.signature(value)
            except (TypeError, ValueError):
                continue  # inspect cannot read it: nothing shown to check
            shown = [p.name for p in signature.parameters.values() if p.default is Ellipsis]
            assert not shown, f"{name}.{exported}{signature} shows Ellipsis for {shown}"
    assert {devmm.Aligned, devmm.Layout, devmm.TrackingAdaptor} <= checked
    # The defaults shown are the ones the constructors use.
    shown = inspect.signature(devmm.Aligned).parameters
    made = devmm.Aligned(devmm.RowMajor())
    assert (shown["unit_stride_alignment"].default, shown["base_alignment"].default) == (128, 256)
    assert (made.unit_stride_alignment, made.base_alignment) == (128, 256)
    hand = devmm.Layout((2,), (1,), "float32")
    assert inspect.signature(devmm.Layout).parameters["base_alignment"].default == hand.base_alignment == 1


# Every public module, with the optional integrations whose import needs
# nothing but devmm (each class is looked up where its __module__ says).
PICKLED_MODULES = [*MODULES, "devmm.statistics", "devmm.integrations.cupy", "devmm.integrations.rmm"]


@pytest.mark.parametrize("name", PICKLED_MODULES)
def test_every_public_class_pickles_by_reference(name: str) -> None:
    # pickle (and so cloudpickle and Dask) refers to a class by its
    # __module__ and __qualname__: a class naming a module that lacks it
    # cannot be sent to another process, a worker plugin's factory included.
    import pickle

    module = importlib.import_module(name)
    classes = [getattr(module, n) for n in module.__all__ if inspect.isclass(getattr(module, n))]
    for cls in classes:
        assert pickle.loads(pickle.dumps(cls)) is cls, f"{name}.{cls.__name__} names {cls.__module__}"


def test_the_extensions_classes_live_where_their_module_says() -> None:
    # The classes public calls return without a module listing them
    # (DeviceRuntime.activate_device's DeviceActivation, a recording's
    # calls) pickle too.
    import pickle

    from devmm import _devmm

    for cls in (v for v in vars(_devmm).values() if inspect.isclass(v) and v.__module__.startswith("devmm")):
        home = importlib.import_module(cls.__module__)
        assert getattr(home, cls.__name__, None) is cls, f"{cls.__name__} is not {cls.__module__}.{cls.__name__}"
        assert pickle.loads(pickle.dumps(cls)) is cls


def test_the_seeds_parameter_names() -> None:
    # Keyword callers of the seed's API (docs/api.md of the Python devmm and
    # the seed's documents) keep working: each name as the seed spells it.
    import devmm.integrations.numpy
    import devmm.testing

    def names(f: object) -> list[str]:
        return [p for p in inspect.signature(f).parameters if p != "self"]  # type: ignore[arg-type]

    assert names(devmm.runtime_for) == ["device"]
    assert names(devmm.Device.from_string) == ["s"]
    assert names(devmm.DeviceMemoryResource.allocate) == ["nbytes", "stream"]
    assert names(devmm.DeviceMemoryResource.deallocate) == ["ptr", "nbytes", "stream"]
    assert names(devmm.CallbackMemoryResource)[:3] == ["alloc_fn", "dealloc_fn", "device"]
    assert names(devmm.empty)[:2] == ["shape", "dtype"] and "layout" in names(devmm.empty)
    assert names(devmm.Aligned)[1:] == ["unit_stride_alignment", "base_alignment"]
    assert names(devmm.LimitingAdaptor) == ["upstream", "limit_bytes"]
    assert {"mr", "stream"} <= set(names(devmm.DeviceBuffer))
    assert names(devmm.testing.mr_conformance)[:4] == ["mr_factory", "write", "read", "stream_factory"]
    assert names(devmm.testing.dlpack_conformance) == ["device"]
    assert names(devmm.get_current_memory_resource) == ["device"]
    assert names(devmm.set_current_memory_resource) == ["mr"]
    assert names(devmm.using_memory_resource) == ["mr"]
    assert names(devmm.integrations.numpy.install) == ["mr"]
    assert names(devmm.Tensor.__dlpack__) == ["stream", "max_version", "dl_device", "copy"]
    # The signatures shown are the ones the calls take.
    cpu = devmm.Device.from_string(s="cpu")
    assert devmm.runtime_for(device=cpu) is devmm.runtime_for(device="cpu")
    assert devmm.get_current_memory_resource(device=cpu) is devmm.get_current_memory_resource(cpu)
