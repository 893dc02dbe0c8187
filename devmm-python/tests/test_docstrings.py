"""Every public class and function of devmm's API, and every public method
of those classes, documents itself with an ``Examples`` section whose
doctests run here (issue 35 item 4): what ``help()`` and the stubs show a
user is an example they can paste, checked against the library.

The API is the ``__all__`` of ``devmm`` and of its public submodules
(``devmm.mrs.*``, ``devmm.statistics``, ``devmm.testing``,
``devmm.integrations.*``). A GPU-only class's example runs on any machine:
it shows the typed error its construction raises where no runtime is
present, and marks only the lines needing the hardware ``+SKIP``."""

import ast
import doctest
import enum
import importlib
import inspect
import pathlib
import re
import types
from collections.abc import Iterator

import pytest

import devmm._devmm

# The modules whose `__all__` is the public API. `torch` and `dask` are not
# in `devmm.integrations.__all__` (they import their framework when used),
# and `mrs.cuda` / `mrs.rocm` not in `devmm.mrs.__all__` (they are imported
# by name), so they are named here.
MODULES = (
    "devmm",
    "devmm.mrs",
    "devmm.mrs.cpu",
    "devmm.mrs.cuda",
    "devmm.mrs.rocm",
    "devmm.statistics",
    "devmm.testing",
    "devmm.integrations",
    "devmm.integrations.numpy",
    "devmm.integrations.cupy",
    "devmm.integrations.numba",
    "devmm.integrations.rmm",
    "devmm.integrations.torch",
    "devmm.integrations.dask",
)


def public_methods(cls: type) -> Iterator[tuple[str, object]]:
    """The routines `cls` defines itself (not inherited, not dunder, not
    properties or enum members): what `help(cls)` lists as its methods."""
    for name, raw in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(raw, (classmethod, staticmethod)):
            yield name, raw.__func__
        elif inspect.isroutine(raw):
            yield name, raw


def api() -> list[tuple[str, object]]:
    """`(qualified name, object)` for every public class and callable, and
    every public method of those classes, each object once."""
    seen: set[int] = set()
    found: list[tuple[str, object]] = []
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if isinstance(obj, types.ModuleType) or id(obj) in seen:
                continue
            if not (inspect.isclass(obj) or inspect.isroutine(obj)):
                continue  # constants: DEFAULT, DEVMM_RUNTIME, __version__, ...
            seen.add(id(obj))
            found.append((f"{module_name}.{name}", obj))
            if inspect.isclass(obj):
                for method_name, method in public_methods(obj):
                    if id(method) not in seen:
                        seen.add(id(method))
                        found.append((f"{module_name}.{name}.{method_name}", method))
    return found


API = api()


def test_the_walk_finds_the_api() -> None:
    names = {name for name, _ in API}
    # One of each kind: a native function, a native class and its method, a
    # Python class and function, a GPU-only class, an integration.
    for expected in (
        "devmm.empty",
        "devmm.DeviceBuffer",
        "devmm.DeviceBuffer.free",
        "devmm.Device.from_string",
        "devmm.statistics.enable_statistics",
        "devmm.mrs.cuda.CudaRuntimeMemoryResource",
        "devmm.integrations.numpy.install",
    ):
        assert expected in names
    assert len(API) > 100


@pytest.mark.parametrize("name,obj", API, ids=[name for name, _ in API])
def test_docstring_has_examples_that_run(name: str, obj: object) -> None:
    doc = inspect.getdoc(obj) or ""
    assert "Examples\n--------" in doc, f"{name}'s docstring has no Examples section"
    finder = doctest.DocTestFinder(recurse=False)
    tests = finder.find(obj, name, globs={})
    examples = sum(len(test.examples) for test in tests)
    assert examples > 0, f"{name}'s Examples section has no doctest"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples of {name} failed"
    skipped_everything = all(
        example.options.get(doctest.SKIP, False) for test in tests for example in test.examples
    )
    assert not skipped_everything, f"{name}'s examples are all skipped: one must run without a GPU"


def stub_docstrings() -> dict[str, str]:
    """The docstrings of the stubs shipped beside the extension
    (`_devmm.pyi`, generated from the Rust source), by `Class.method` or
    `name`."""
    stub = pathlib.Path(devmm._devmm.__file__).with_name("_devmm.pyi")
    tree = ast.parse(stub.read_text())
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            found[node.name] = ast.get_docstring(node) or ""
        if isinstance(node, ast.ClassDef):
            for member in node.body:
                if isinstance(member, ast.FunctionDef):
                    found[f"{node.name}.{member.name}"] = ast.get_docstring(member) or ""
    return found


#: Doc lines addressed to the stub generator (devmm-codegen), which leaves
#: them out of the stubs; PyO3 keeps them in the runtime docstring.
DIRECTIVES = ("Python type:", "Python enum:", "Python protocol:", "Python class:", "Python dataclass:")


def without_directives(doc: str) -> str:
    """`doc` without the stub generator's directive lines, blank runs
    collapsed as removing a paragraph of its own leaves them."""
    kept = [line for line in doc.splitlines() if not line.startswith(DIRECTIVES)]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()


def test_the_shipped_stubs_carry_the_same_docstrings() -> None:
    stubs = stub_docstrings()
    native = {id(value) for value in vars(devmm._devmm).values()}
    compared = 0
    for name, obj in API:
        owner, member = name.split(".")[-2:]
        cls = getattr(devmm._devmm, owner, None)
        # A native top-level object, or a method of a native class.
        if inspect.isclass(obj) and issubclass(obj, enum.Enum):
            # An IntEnum the extension builds at run time: its stub is
            # written from the core enum's doc (devmm/src/device.rs).
            continue
        if id(obj) in native:
            key = member
        elif inspect.isclass(cls) and id(cls) in native and member in vars(cls):
            key = f"{owner}.{member}"
        else:
            continue
        assert key in stubs, f"_devmm.pyi has no {key}"
        runtime = without_directives(inspect.getdoc(obj) or "")
        assert without_directives(stubs[key]) == runtime, f"_devmm.pyi's docstring of {key} differs from {name}'s"
        compared += 1
    assert compared > 80
