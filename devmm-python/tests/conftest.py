"""Shared fixtures for the devmm Python tests."""

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
