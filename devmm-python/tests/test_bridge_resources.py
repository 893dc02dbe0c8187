"""The resources over other libraries' allocators (``mrs.cuda``'s
``CupyAllocatorMemoryResource`` and ``RmmMemoryResource``), where the
library is missing: as the seed's, they are made without it when nothing
needs it yet, and raise ``RuntimeUnavailableError`` (an ``ImportError``)
only when a call does. Bad sizes are a ``ValueError`` naming ``nbytes``,
before the library is asked. (With the libraries, tests-bridges.)"""

from __future__ import annotations

import sys
from typing import Any

import pytest

import devmm
from devmm.mrs.cuda import CupyAllocatorMemoryResource, RmmMemoryResource

CUDA0 = devmm.Device("cuda")


@pytest.fixture
def no_libraries(monkeypatch: pytest.MonkeyPatch) -> None:
    # ``None`` in sys.modules makes ``import`` raise ImportError.
    for name in ("cupy", "rmm"):
        monkeypatch.setitem(sys.modules, name, None)


class InnerRmmResource:
    """What devmm calls of an rmm resource; it must not be reached here."""

    def allocate(self, nbytes: int, stream: Any) -> int:
        raise AssertionError("rmm's resource was asked")

    def deallocate(self, ptr: int, nbytes: int, stream: Any) -> None:
        raise AssertionError("rmm's resource was asked")


def test_a_cupy_resource_is_made_without_cupy_and_needs_it_to_allocate(no_libraries: None) -> None:
    mr = CupyAllocatorMemoryResource()
    assert mr.device == CUDA0 and mr.allocator is None and mr.stream_ordered
    assert mr.guaranteed_alignment() == 256 and mr._debug_live_count() == 0
    with pytest.raises(devmm.RuntimeUnavailableError, match="cupy"):
        mr.allocate(64)
    given = CupyAllocatorMemoryResource(lambda nbytes: None, "cuda:1")
    assert given.device == devmm.Device("cuda", 1)


def test_an_rmm_resource_over_a_given_resource_is_made_without_rmm(no_libraries: None) -> None:
    inner = InnerRmmResource()
    mr = RmmMemoryResource(inner, CUDA0)
    assert mr.inner is inner and mr.device == CUDA0 and mr.stream_ordered
    assert mr.guaranteed_alignment() == 256 and mr._debug_live_count() == 0
    with pytest.raises(devmm.RuntimeUnavailableError, match="rmm"):
        mr.allocate(64)
    # Without a resource to wrap, rmm's own is read when the resource is made.
    with pytest.raises(devmm.RuntimeUnavailableError, match="rmm"):
        RmmMemoryResource()


@pytest.mark.parametrize("make", [lambda: CupyAllocatorMemoryResource(), lambda: RmmMemoryResource(InnerRmmResource(), CUDA0)])
def test_bad_sizes_are_value_errors_naming_nbytes(no_libraries: None, make: Any) -> None:
    mr = make()
    for nbytes in (-1, 1 << 64):
        with pytest.raises(ValueError, match="nbytes"):
            mr.allocate(nbytes)
        with pytest.raises(ValueError, match="nbytes"):
            mr.deallocate(0x1000, nbytes)
    # Zero bytes is the null pointer, without asking the library (ADR 0016 item 5).
    assert mr.allocate(0) == 0
    mr.deallocate(0, 0)
    assert mr._debug_live_count() == 0


def test_reprs_are_the_seeds(no_libraries: None) -> None:
    assert repr(CupyAllocatorMemoryResource()) == "CupyAllocatorMemoryResource(allocator=None, device=cuda:0)"
    inner = InnerRmmResource()
    assert repr(RmmMemoryResource(inner, CUDA0)) == f"RmmMemoryResource(inner={inner!r}, device=cuda:0)"
