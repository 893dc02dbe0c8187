"""Shared fixtures for the devmm Python tests."""

import os
from collections.abc import Callable

import pytest

import devmm
from devmm.mrs.cpu import MallocMemoryResource


@pytest.fixture
def cpu() -> devmm.Device:
    return devmm.Device.from_string("cpu")


@pytest.fixture
def stream(cpu: devmm.Device) -> devmm.Stream:
    return devmm.runtime_for(cpu).default_stream(cpu)


@pytest.fixture
def stats() -> devmm.StatisticsAdaptor:
    return devmm.StatisticsAdaptor(MallocMemoryResource())


@pytest.fixture
def fake_library() -> Callable[[str], str]:
    """The path of the fake driver library the environment variable names; a run without
    it fails (never skips): scripts/test-python.sh builds the fakes and names them."""

    def named(env: str) -> str:
        library = os.environ.get(env)
        if not library:
            pytest.fail(
                f"{env} is not set: run these tests through scripts/test-python.sh, which "
                f"builds the fake drivers and names them",
                pytrace=False,
            )
        return library

    return named
