"""Third-party runtimes: the ``devmm.runtimes`` entry-point group.

A distribution registers a runtime with an entry point in that group whose
name is the runtime's name and whose value names a zero-argument factory
(a class, usually) returning the runtime object::

    [project.entry-points."devmm.runtimes"]
    metal = "devmm_metal:MetalRuntime"

The object implements the seed's ``DeviceRuntime`` protocol in Python: at
least ``name`` (the entry point's name), ``device_types`` (a non-empty
collection of ``devmm.DeviceType``, a ``frozenset`` as devmm's own are),
``device_count(device_type)``,
``default_memory_resource(device)`` and ``default_stream(device)``.

Discovery reads only the distributions' metadata: ``runtime_names()`` lists
the entry points after devmm's own runtimes without importing them, and
``DEVMM_RUNTIME`` may name one. ``runtime_for(name)`` imports and builds it
on first use and returns the same object afterwards; ``available_runtimes()``
includes every one that loads. Lookups by device or device type stay with
devmm's runtimes, which serve every device type devmm knows (docs/adr/0018).

``runtime_names()`` (so ``available_runtimes()`` too) scans the entry points
on each call; a lookup by name uses the last scan, and scans again for a
name it lacks (a distribution installed since). Each scan replaces the last
one, in the core too. The seed's test seams are here: ``_entry_points()`` is
the scan (patch it to list fakes), ``_clear_spec_cache()`` makes the next
lookup scan again, and ``_loaded`` maps each entry point's name to the
runtime it made.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterable
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from .. import _devmm
from .._core.device import Device
from .._devmm import DeviceRuntime, DeviceType, RuntimeUnavailableError

GROUP = "devmm.runtimes"

#: What a third-party runtime object must have.
REQUIRED = ("name", "device_types", "device_count", "default_memory_resource", "default_stream")

_lock = threading.Lock()
#: The entry points of the last scan by name; ``None`` until one is made.
_found: dict[str, EntryPoint] | None = None
_loaded: dict[str, Any] = {}


def _entry_points() -> Iterable[EntryPoint]:
    """The installed ``devmm.runtimes`` entry points (the seed's seam for
    tests)."""
    return entry_points(group=GROUP)


def _clear_spec_cache() -> None:
    """Forgets the last scan, so that the next lookup reads the entry points
    again (the seed's test seam); runtimes already made stay in ``_loaded``."""
    global _found
    with _lock:
        _found = None


def discover() -> None:
    """Reads the ``devmm.runtimes`` entry points of the installed
    distributions (metadata only) and names them to the core's discovery in
    place of the last scan's; the core checks ``DEVMM_RUNTIME`` against
    every runtime known. An entry point taking a built-in runtime's name is
    ignored with a warning."""
    global _found
    found: dict[str, EntryPoint] = {}
    for ep in _entry_points():
        found.setdefault(ep.name, ep)  # the first of a name wins, as the seed's
    for name, reason in _devmm._register_external_runtimes(list(found)):
        warnings.warn(f"ignoring the {GROUP} entry point {found.pop(name).value!r}: {reason}", stacklevel=2)
    with _lock:
        _found = found


def _scanned() -> dict[str, EntryPoint]:
    """The last scan's entry points, scanning first when there is none."""
    found = _found
    if found is None:
        discover()
        found = _found
    return found if found is not None else {}


def _load(name: str) -> Any:
    ep = _scanned()[name]  # before the lock: a scan takes it
    with _lock:
        if name in _loaded:
            return _loaded[name]
        try:
            runtime = ep.load()()
        except Exception as err:
            raise RuntimeUnavailableError(
                f"runtime {name!r} (entry point {ep.value!r} of group {GROUP!r}) failed to load: {err!r}"
            ) from err
        missing = [attr for attr in REQUIRED if not hasattr(runtime, attr)]
        if missing:
            raise TypeError(
                f"the {GROUP} entry point {name!r} ({ep.value!r}) made {runtime!r}, which lacks "
                f"{', '.join(missing)}; a runtime provides {', '.join(REQUIRED)}"
            )
        # The core's check, as for a runtime registered in Rust: its own
        # name, at least one device type (a ValueError).
        _devmm._check_runtime_plugin(name, runtime.name, list(runtime.device_types))
        _loaded[name] = runtime
        return runtime


def runtime_names() -> tuple[str, ...]:
    """The runtimes whose platform is present, found by probing only (no
    driver is loaded, no third-party runtime imported): devmm's, then the
    ``devmm.runtimes`` entry points, read again on each call (milliseconds:
    it lists the installed distributions). ``DEVMM_RUNTIME`` restricts the
    list to ``cpu`` and the runtime it names, listed without probing
    (forced, as the seed's: ``runtime_for`` then says why it cannot run).

    Returns a tuple of names; ``"cpu"`` is always among them.

    Examples
    --------
    >>> import devmm
    >>> "cpu" in devmm.runtime_names()
    True
    """
    discover()
    return _devmm.runtime_names()


def runtime_for(device: Device | DeviceType | int | str) -> DeviceRuntime | Any:
    """The runtime for a device, a device type (or its DLPack code) or a
    name; loaded on first use and the same object afterwards. A name may be
    a third-party runtime's.

    ``device``: a ``Device``, a ``DeviceType``, its DLPack code (``1``) or a
    runtime name (``"cpu"``, ``"cuda"``, ``"rocm"`` or a registered one).
    Returns the ``DeviceRuntime``.

    Raises
    ------
    RuntimeUnavailableError
        (an ``ImportError``) No runtime serves ``device``, or its driver is
        absent, saying why.

    Examples
    --------
    >>> import devmm
    >>> cpu = devmm.runtime_for("cpu")
    >>> cpu.name, cpu is devmm.runtime_for(devmm.Device("cpu")) is devmm.runtime_for(1)
    ('cpu', True)
    >>> devmm.runtime_for("tpu")
    Traceback (most recent call last):
        ...
    devmm.RuntimeUnavailableError: runtime "tpu" is unavailable: no runtime is registered for it ...
    """
    if not isinstance(device, str):
        return _devmm.runtime_for(device)
    if device in _scanned():
        return _load(device)
    try:
        return _devmm.runtime_for(device)
    except RuntimeUnavailableError:
        # Perhaps a distribution installed since the last discovery.
        discover()
        if device in _scanned():
            return _load(device)
        raise


def available_runtimes() -> tuple[DeviceRuntime | Any, ...]:
    """Every runtime ``runtime_names()`` lists that loads and can run here,
    in that order, each the object ``runtime_for`` returns for it. The CPU
    runtime is always first.

    Examples
    --------
    >>> import devmm
    >>> runtimes = devmm.available_runtimes()
    >>> runtimes[0].name, runtimes[0] is devmm.runtime_for("cpu")
    ('cpu', True)
    """
    runtimes: list[DeviceRuntime | Any] = list(_devmm.available_runtimes())
    for name in runtime_names():
        if name in _scanned():
            try:
                runtimes.append(_load(name))
            except RuntimeUnavailableError:
                continue
    return tuple(runtimes)
