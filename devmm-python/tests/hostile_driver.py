"""Drives every public function, class and method of devmm with hostile
arguments (negative, huge, wrong type, NaN, None, subclasses, devmm's own
objects in the wrong place), with hypothesis.

Run by ``test_hostile_inputs.py`` in a subprocess: a signal, an abort or a
hang kills only this process, and the test reports it. Here, one of the
exceptions the seed names for bad input (``EXPECTED``) is the answer to a
bad call; any other exception (an ``OverflowError``, ``KeyError`` or
``AttributeError`` showing through the binding, a ``SystemError`` from a
C-API misuse) is recorded and fails the run at the end, with every label
that raised it; a ``PanicException`` or any other ``BaseException`` stops
it at once.

Prints ``hostile calls: N`` at the end; ``DEVMM_HOSTILE_EXAMPLES`` sets
the examples per target and ``DEVMM_HOSTILE_TIMEOUT`` the seconds after
which a run counts as hung.
"""

from __future__ import annotations

import ctypes
import faulthandler
import gc
import inspect
import math
import os
import sys
from typing import Any, Callable

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import devmm
import devmm.integrations.numpy
import devmm.testing
from devmm.mrs.cpu import BytearrayMemoryResource, MallocMemoryResource, NumpyHandlerMemoryResource

EXAMPLES = int(os.environ.get("DEVMM_HOSTILE_EXAMPLES", "25"))
CALLS = 0

# The typed answers to a bad call: the seed's exceptions (NotImplementedError,
# the abstract base's answer, is a RuntimeError) and devmm's own.
EXPECTED: tuple[type[BaseException], ...] = (
    ValueError,
    TypeError,
    MemoryError,
    BufferError,
    RuntimeError,
    devmm.RuntimeUnavailableError,
    devmm.testing.RecordingMisuseError,
)
# Any other exception, by type, with the first calls that raised it.
UNEXPECTED: dict[str, list[str]] = {}


class SubInt(int):
    pass


class SubStr(str):
    pass


class BadIndex:
    def __index__(self) -> int:
        raise RuntimeError("no index")


class HugeIndex:
    def __index__(self) -> int:
        return 2**100


class LyingLen:
    def __len__(self) -> int:
        return -1

    def __iter__(self) -> Any:
        return iter([1, 2])


class PyResource(devmm.DeviceMemoryResource):
    """A Python-defined resource over a checked one, declared real."""

    dereferenceable = True

    def __init__(self) -> None:
        super().__init__()
        self.inner = BytearrayMemoryResource()

    def allocate(self, nbytes: int, stream: Any = None) -> int:
        return self.inner.allocate(nbytes, stream)

    def deallocate(self, ptr: int, nbytes: int, stream: Any = None) -> None:
        self.inner.deallocate(ptr, nbytes, stream)


class LyingResource(devmm.DeviceMemoryResource):
    """A subclass whose probes answer with nonsense."""

    device = "banana"  # type: ignore[assignment]

    def guaranteed_alignment(self) -> int:
        return -3

    def allocate(self, nbytes: int, stream: Any = None) -> int:
        return -1

    def deallocate(self, ptr: int, nbytes: int, stream: Any = None) -> None:
        raise ValueError("never")


cpu = devmm.Device.from_string("cpu")
f32 = devmm.DType.from_string("float32")
heap = BytearrayMemoryResource()
stream = devmm.runtime_for(cpu).default_stream(cpu)


def samples() -> list[Any]:
    """Valid devmm objects, for methods to be called on and as arguments."""
    recording = devmm.testing.RecordingMemoryResource()
    resources: list[Any] = [
        MallocMemoryResource(),
        BytearrayMemoryResource(alignment=128),
        NumpyHandlerMemoryResource(),
        recording,
        devmm.StatisticsAdaptor(MallocMemoryResource()),
        devmm.LimitingAdaptor(BytearrayMemoryResource(), 1 << 20),
        devmm.LoggingAdaptor(devmm.StatisticsAdaptor(recording)),
        devmm.CallbackMemoryResource(lambda n, s: heap.allocate(n), lambda p, n, s: heap.deallocate(p, n)),
        PyResource(),
        LyingResource(),
    ]
    policies: list[Any] = [
        devmm.RowMajor(),
        devmm.ColMajor(),
        devmm.Permuted((1, 0)),
        devmm.Aligned(devmm.RowMajor(), unit_stride_alignment=64, base_alignment=128),
        devmm.DeviceOptimal(),
    ]
    tensor = devmm.empty((2, 3), "float32")
    return [
        cpu,
        devmm.Device.from_string("cuda:1"),
        devmm.DeviceType.CPU,
        f32,
        devmm.DType.from_string("bfloat16"),
        stream,
        devmm.DEFAULT,
        devmm.PER_THREAD_DEFAULT,
        devmm.runtime_for("cpu"),
        devmm.RowMajor()((2, 3), f32, cpu),
        *policies,
        *resources,
        devmm.DeviceBuffer(64),
        devmm.DeviceBuffer(16, mr=recording),
        tensor,
        tensor.to_read_only(),
        devmm.empty((0,), "int8"),
        devmm.using_memory_resource(resources[1]),
    ]


SAMPLES = samples()

hostile = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 7, 64, 2**31, 2**32, 2**62, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, -0.0, math.inf, np.float64("nan"), np.int64(-1), np.uint64(2**64 - 1)]),
    st.none(),
    st.booleans(),
    st.text(max_size=12),
    st.sampled_from(
        ["cpu", "cpu:0", "cpu:1", "cuda:0", "cuda:-1", "rocm:99999999999", "banana", "float32", "int8", "x" * 300]
    ),
    st.binary(max_size=16),
    st.builds(SubInt, st.integers(-(2**65), 2**65)),
    st.builds(SubStr, st.sampled_from(["cpu", "float32", "cuda:0", "?"])),
    st.sampled_from([BadIndex(), HugeIndex(), LyingLen(), object(), type, Exception("x")]),
    st.lists(st.integers(min_value=-(2**65), max_value=2**65), max_size=5),
    st.lists(st.integers(min_value=0, max_value=8), max_size=4).map(tuple),
    st.sampled_from([bytearray(b"abc"), memoryview(b"0123456789abcdef"), np.zeros(3), np.ones((2, 2), np.int32)]),
    st.sampled_from([lambda *a, **k: 2**70, lambda *a, **k: None, lambda *a, **k: -1, print]),
    st.sampled_from(SAMPLES),
)


def check_outcome(
    label: str, call: Callable[[], Any], also: tuple[type[BaseException], ...] = ()
) -> None:
    """Runs one call; the expected typed errors (and `also`) are fine, any
    other exception is recorded as a failure."""
    global CALLS
    CALLS += 1
    try:
        result = call()
    except EXPECTED + also:
        return
    except Exception as error:
        seen = UNEXPECTED.setdefault(type(error).__name__, [])
        if len(seen) < 20:
            seen.append(f"{label}: {error!r}")
        return
    # Installers change NumPy's global allocator: undo at once.
    if isinstance(result, devmm.integrations.Installer):
        result.uninstall()


def parameters(target: Callable[..., Any]) -> list[str]:
    try:
        params = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self"]


# The conformance checks answer a failing resource or producer (a hostile factory) with
# AssertionError, their documented result: it fails the caller's test.
CONFORMANCE = {devmm.testing.mr_conformance, devmm.testing.dlpack_conformance}


# `empty_like` reads `obj.shape` and `obj.dtype` as the seed does: an object
# without them is that attribute's AttributeError.
ATTRIBUTE_READERS = {devmm.empty_like}


def drive(label: str, target: Callable[..., Any]) -> None:
    also: tuple[type[BaseException], ...] = (AssertionError,) if target in CONFORMANCE else ()
    if target in ATTRIBUTE_READERS:
        also = (AttributeError,)
    names = parameters(target)
    kwargs_strategy = st.dictionaries(st.sampled_from(names), hostile, max_size=3) if names else st.just({})

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(args=st.lists(hostile, max_size=4), kwargs=kwargs_strategy)
    def run(args: list[Any], kwargs: dict[str, Any]) -> None:
        # Never declare made-up pointers real: that is the caller's promise.
        kwargs.pop("dereferenceable", None)
        check_outcome(label, lambda: target(*args, **kwargs), also)

    run()


PUBLIC_DUNDERS = {"__dlpack__", "__dlpack_device__", "__enter__", "__exit__", "__repr__", "__eq__", "__hash__", "__call__"}


def targets() -> list[tuple[str, Callable[..., Any]]]:
    found: list[tuple[str, Callable[..., Any]]] = []
    modules = [devmm, devmm.mrs.cpu, devmm.testing, devmm.integrations.numpy]
    for module in modules:
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if callable(obj) and not isinstance(obj, (devmm.StreamSentinel,)):
                found.append((f"{module.__name__}.{name}", obj))

    for sample in SAMPLES:
        for name in dir(sample):
            if name.startswith("_") and name not in PUBLIC_DUNDERS and name != "_debug_live_count":
                continue
            if isinstance(sample, int) and hasattr(int, name) and name not in PUBLIC_DUNDERS:
                continue  # DeviceType (an IntEnum) inherits int's methods: Python's, not devmm's
            try:
                attr = getattr(sample, name)
            except AttributeError:
                # A getter with no answer on this device (`__cuda_array_interface__` of host
                # memory, so `hasattr` is False): AttributeError is its protocol. Any other
                # exception from a getter stops the run.
                continue
            if callable(attr):
                found.append((f"{type(sample).__name__}.{name}", attr))
    return found


def drive_setters() -> None:
    """Assigning hostile values to every attribute of every sample."""
    values = [None, -1, 2**64, math.nan, "banana", "cuda:0", object(), SubStr("cpu")]
    for sample in SAMPLES:
        for name in dir(sample):
            if name.startswith("_"):
                continue
            for value in values:
                # A read-only attribute refuses any assignment with an AttributeError (a frozen
                # Device's FrozenInstanceError is one): that is the answer, not a leak.
                check_outcome(
                    f"{type(sample).__name__}.{name} = {value!r}",
                    lambda: setattr(sample, name, value),
                    also=(AttributeError,),
                )


def main() -> int:
    faulthandler.enable()
    # A hang prints every thread's stack before the parent's timeout hits.
    faulthandler.dump_traceback_later(int(os.environ.get("DEVMM_HOSTILE_TIMEOUT", "240")), exit=True)
    all_targets = targets()
    for label, target in all_targets:
        drive(label, target)
    drive_setters()
    del SAMPLES[:]
    gc.collect()
    print(f"hostile targets: {len(all_targets)}")
    print(f"hostile calls: {CALLS}")
    for name, seen in UNEXPECTED.items():
        print(f"unexpected {name}:")
        for line in seen:
            print(f"  {line}")
    sys.stdout.flush()
    return 1 if UNEXPECTED else 0


if __name__ == "__main__":
    sys.exit(main())
