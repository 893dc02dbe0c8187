"""The Numba EMM plugin against the real numba-cuda package over devmm's
fake CUDA runtime. numba-cuda imports without a GPU (its libcudart comes
from nvidia-cuda-runtime) but cannot make a context, so the plugin's
methods are called on their own, with a stand-in for the context Numba
would pass (only its device ordinal and identity are read). ``mempin``,
mapped host memory, ``get_ipc_handle`` of memory devmm did not allocate and
``IpcHandle.open`` are Numba's own driver calls and run only on a GPU
(scripts/gpu-smoke-bridges.py); ``get_ipc_handle`` of devmm's ``cudaMalloc``
memory is devmm's, over the fake."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from types import SimpleNamespace
from typing import TYPE_CHECKING

import numba.cuda.cudadrv.driver as driver
import pytest

import devmm
import devmm.integrations.numba as bridge
from devmm.integrations import Installer
from devmm.integrations.numba import DevmmEMMPlugin
from devmm.mrs.cuda import CudaRuntimeMemoryResource

if TYPE_CHECKING:
    from conftest import FakeDriver


class Context:
    """What the plugin reads of Numba's context."""

    def __init__(self, ordinal: int = 0) -> None:
        identity = {"pci_domain_id": 0, "pci_bus_id": ordinal, "pci_device_id": 0}
        self.device = SimpleNamespace(id=ordinal, get_device_identity=lambda: identity)


@pytest.fixture(autouse=True)
def numba_logger(monkeypatch: pytest.MonkeyPatch) -> None:
    # Numba makes its driver logger when it initialises the driver, which
    # needs a GPU; its pending-deallocation queue logs through it.
    monkeypatch.setattr(driver, "_logger", driver.make_logger(), raising=False)


@pytest.fixture
def plugin() -> DevmmEMMPlugin:
    made = DevmmEMMPlugin(context=Context())
    made.initialize()
    return made


def device_pointer(memory: object) -> int:
    return int(memory.device_pointer)  # type: ignore[attr-defined]


def test_memalloc_allocates_through_the_current_resource(plugin: DevmmEMMPlugin, cuda_stats: devmm.StatisticsAdaptor) -> None:
    assert plugin.interface_version == 1
    with devmm.using_memory_resource(cuda_stats):
        memory = plugin.memalloc(1000)
    assert memory.size == 1000 and device_pointer(memory) != 0
    assert (cuda_stats.current_bytes, cuda_stats.allocations) == (1000, 1)
    # Freed through Numba's pending-deallocation queue, when Numba flushes it.
    del memory
    gc.collect()
    plugin.deallocations.clear()
    assert cuda_stats.current_bytes == 0


def test_memalloc_out_of_memory_is_devmms_error_and_runs_the_hooks_once(plugin: DevmmEMMPlugin) -> None:
    seen: list[BaseException] = []
    limited = devmm.LimitingAdaptor(CudaRuntimeMemoryResource(), limit_bytes=64)
    with devmm.using_memory_resource(limited), devmm.on_out_of_memory(seen.append):
        with pytest.raises(devmm.OutOfMemoryError) as caught:
            plugin.memalloc(100)
    assert (caught.value.nbytes, caught.value.largest_fit) == (100, 64)
    assert caught.value.device == devmm.Device.from_string("cuda:0")
    assert len(seen) == 1 and isinstance(seen[0], devmm.OutOfMemoryError) and seen[0].nbytes == 100


def test_memalloc_out_of_memory_flushes_pending_frees_and_tries_again(plugin: DevmmEMMPlugin) -> None:
    # As Numba's own manager: the frees its queue holds back come first.
    limited = devmm.LimitingAdaptor(CudaRuntimeMemoryResource(), limit_bytes=128)
    with devmm.using_memory_resource(limited):
        memory = plugin.memalloc(100)
        del memory
        gc.collect()
        assert len(plugin.deallocations) == 1 and limited.used_bytes == 100
        again = plugin.memalloc(100)
    assert again.size == 100 and len(plugin.deallocations) == 0
    assert limited.used_bytes == 100
    plugin.reset()


def test_memalloc_uses_the_current_resource_of_its_contexts_device(cuda_stats: devmm.StatisticsAdaptor) -> None:
    # Per device, as the seed's plugin: a context on cuda:1 allocates through
    # cuda:1's current resource, never through cuda:0's, whichever is made current.
    cuda1 = devmm.Device.from_string("cuda:1")
    cuda1_stats = devmm.StatisticsAdaptor(CudaRuntimeMemoryResource(cuda1))
    on_cuda1 = DevmmEMMPlugin(context=Context(1))
    on_cuda1.initialize()
    assert on_cuda1.device == cuda1
    with devmm.using_memory_resource(cuda_stats), devmm.using_memory_resource(cuda1_stats):
        memory = on_cuda1.memalloc(512)
    assert cuda_stats.allocations == 0
    assert (cuda1_stats.current_bytes, cuda1_stats.allocations) == (512, 1)
    del memory
    gc.collect()
    on_cuda1.deallocations.clear()
    assert cuda1_stats.current_bytes == 0
    # With only cuda:0's resource made current, cuda:1's own default serves it.
    with devmm.using_memory_resource(cuda_stats):
        kept = on_cuda1.memalloc(64)
    assert cuda_stats.allocations == 0 and cuda1_stats.allocations == 1
    assert kept.size == 64 and device_pointer(kept) != 0
    on_cuda1.reset()


def test_defer_cleanup_defers_device_frees(plugin: DevmmEMMPlugin, cuda_stats: devmm.StatisticsAdaptor) -> None:
    with devmm.using_memory_resource(cuda_stats):
        memory = plugin.memalloc(64)
    with plugin.defer_cleanup():
        del memory
        gc.collect()
        plugin.deallocations.clear()
        assert cuda_stats.current_bytes == 64
    plugin.deallocations.clear()
    assert cuda_stats.current_bytes == 0


def test_reset_frees_everything_live(plugin: DevmmEMMPlugin, cuda_stats: devmm.StatisticsAdaptor) -> None:
    with devmm.using_memory_resource(cuda_stats):
        kept = [plugin.memalloc(128) for _ in range(3)]
    assert cuda_stats.current_bytes == 384
    plugin.reset()
    assert cuda_stats.current_bytes == 0
    del kept
    gc.collect()
    plugin.deallocations.clear()  # the pointers' own finalizers find nothing left
    assert cuda_stats.deallocations == 3


def test_memory_info_and_pinned_memory_come_from_devmm(
    plugin: DevmmEMMPlugin, cuda0: devmm.Device, fake_cudart: FakeDriver
) -> None:
    info = plugin.get_memory_info()
    assert (info.free, info.total) == devmm.get_current_memory_resource(cuda0).available_memory()
    synchronized = fake_cudart.calls("cudaStreamSynchronize")
    pinned = plugin.memhostalloc(256)
    owner = pinned.owned
    assert isinstance(owner, devmm.DeviceBuffer) and owner.device.type is devmm.DeviceType.CUDA_HOST
    assert pinned.size == 256
    # Numba's host code writes the block at once: over the stream-ordered
    # host pool, the allocation's stream has reached it first.
    assert owner.mr.stream_ordered
    assert fake_cudart.calls("cudaStreamSynchronize") > synchronized, "handed out unordered"


# Run in a process of its own: a pointer Numba cannot read crashes NumPy's
# view of the memory (SIGSEGV), which must fail this test, not end pytest.
PINNED_ARRAY = """
import gc
from types import SimpleNamespace

import numpy as np
import numba.cuda.api as api

import devmm
from devmm.integrations.numba import DevmmEMMPlugin

plugin = DevmmEMMPlugin(context=SimpleNamespace(device=SimpleNamespace(id=0)))
plugin.initialize()
made = []

def memhostalloc(size, mapped=False, portable=False, wc=False):
    made.append(plugin.memhostalloc(size, mapped=mapped, portable=portable, wc=wc))
    return made[-1]

# pinned_array as Numba runs it, past its require_context (no GPU here):
# the context it asks for pinned memory is the plugin's.
api.current_context = lambda: SimpleNamespace(memhostalloc=memhostalloc)
array = api.pinned_array.__wrapped__((4, 8), dtype=np.float32)
owner = made[0].owned
assert isinstance(owner, devmm.DeviceBuffer) and owner.device.type is devmm.DeviceType.CUDA_HOST, owner
assert array.ctypes.data == owner.ptr and array.nbytes == owner.size == 128, (array.ctypes.data, owner)
array[...] = np.arange(32, dtype=np.float32).reshape(4, 8)
del made[:], owner
gc.collect()  # the array alone keeps devmm's pinned buffer alive
assert (array.ravel() == np.arange(32, dtype=np.float32)).all()
print("ok")
"""


def test_pinned_array_views_devmm_pinned_memory() -> None:
    result = subprocess.run([sys.executable, "-c", PINNED_ARRAY], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", (
        f"numba.cuda.pinned_array over the plugin's memhostalloc exited {result.returncode}:\n{result.stderr}"
    )


def test_install_selects_the_plugin_until_uninstalled(cuda_stats: devmm.StatisticsAdaptor) -> None:
    before = driver._memory_manager
    installer = bridge.install()
    assert isinstance(installer, Installer) and repr(installer) == "Installer(library='Numba', installed)"
    assert driver._memory_manager is DevmmEMMPlugin
    made = driver._memory_manager(context=Context())
    with devmm.using_memory_resource(cuda_stats):
        made.memalloc(10)
    assert cuda_stats.allocations == 1  # devmm's current resource when Numba allocates
    second = bridge.install()
    with pytest.raises(RuntimeError, match="reverse order of install"):
        installer.uninstall()
    assert installer.installed
    second.uninstall()
    assert driver._memory_manager is DevmmEMMPlugin  # the first install's, still current
    installer.uninstall()
    assert driver._memory_manager is before and not installer.installed


def test_uninstall_after_numba_made_a_context_is_refused() -> None:
    before = driver._memory_manager
    installer = bridge.install()
    driver._memory_manager(context=Context()).initialize()  # what Numba does for a new context
    with pytest.raises(RuntimeError, match="cannot swap a context's manager"):
        installer.uninstall()
    assert installer.installed
    driver._memory_manager = before  # this test's own clean-up: Numba has no context here
    # A later install that no context used restores.
    later = bridge.install()
    later.uninstall()
    assert driver._memory_manager is before


def test_the_environment_variable_selects_the_plugin() -> None:
    script = (
        "import numba.cuda.cudadrv.driver as d; d._ensure_memory_manager();"
        "from devmm.integrations.numba import DevmmEMMPlugin;"
        "assert d._memory_manager is DevmmEMMPlugin, d._memory_manager; print('ok')"
    )
    env = {**os.environ, "NUMBA_CUDA_MEMORY_MANAGER": "devmm.integrations.numba"}
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


def test_ipc_of_stream_ordered_memory_is_refused(plugin: DevmmEMMPlugin, cuda_stats: devmm.StatisticsAdaptor, monkeypatch: pytest.MonkeyPatch) -> None:
    # cuIpcGetMemHandle serves only cudaMalloc memory; the default CUDA
    # resource allocates with cudaMallocAsync (the fake has memory pools).
    import numpy as np
    from numba.cuda.cudadrv import devicearray, devices

    assert cuda_stats.stream_ordered
    with devmm.using_memory_resource(cuda_stats):
        memory = plugin.memalloc(64)
    array = devicearray.DeviceNDArray((16,), (4,), np.dtype(np.float32), gpu_data=memory)
    # Numba asks the current context, whose memory manager is the plugin.
    monkeypatch.setattr(devices, "get_context", lambda: SimpleNamespace(get_ipc_handle=plugin.get_ipc_handle))
    with pytest.raises(ValueError) as refused:
        array.get_ipc_handle()
    message = str(refused.value)
    assert "cuda:0" in message and repr(cuda_stats) in message, message
    assert "cudaMallocAsync" in message and "cudaMalloc" in message, message
    assert "CudaRuntimeMemoryResource(device, async_alloc=False)" in message, message
    # A view into the allocation is refused the same way.
    with pytest.raises(ValueError, match="cudaMallocAsync"):
        plugin.get_ipc_handle(memory.view(16))
    del array, memory, refused  # the traceback holds the pointer too
    gc.collect()
    plugin.deallocations.clear()
    assert cuda_stats.current_bytes == 0


def test_ipc_of_memory_devmm_cannot_vouch_for_is_refused(plugin: DevmmEMMPlugin, cuda0: devmm.Device) -> None:
    # A Python resource hands out addresses devmm did not allocate: even
    # when they come from cudaMalloc, devmm cannot tell.
    synchronous = CudaRuntimeMemoryResource(cuda0, async_alloc=False)
    callbacks = devmm.CallbackMemoryResource(
        lambda nbytes, stream: synchronous.allocate(nbytes, stream),
        lambda ptr, nbytes, stream: synchronous.deallocate(ptr, nbytes, stream),
        device=cuda0,
    )
    with devmm.using_memory_resource(callbacks):
        memory = plugin.memalloc(64)
    with pytest.raises(ValueError, match=r"CallbackMemoryResource\(.*\) hands out memory devmm did not allocate"):
        plugin.get_ipc_handle(memory)
    del memory
    gc.collect()
    plugin.deallocations.clear()


def handle_bytes(handle: object) -> bytes:
    """The 64 bytes of a CUDA bindings ``CUipcMemHandle``."""
    import ctypes

    return bytes((ctypes.c_char * 64).from_address(handle.getPtr()))  # type: ignore[attr-defined]


OPEN_IN_CHILD = """
import sys
import devmm
handle = devmm.IpcMemHandle._from_parts("cuda:0", int(sys.argv[2]), bytes.fromhex(sys.argv[1]), int(sys.argv[3]))
opened = devmm.DeviceBuffer.from_ipc_handle(handle)
data = bytes(opened.copy_to_host())
opened.copy_from_host(b"CHILD")
opened.free()
print(data.hex())
"""


def test_ipc_of_cudamalloc_memory_is_devmms_handle_in_numbas_shape(plugin: DevmmEMMPlugin, cuda0: devmm.Device) -> None:
    # cudaMalloc memory, through pass-through adaptors: the handle is
    # devmm's cudaIpcGetMemHandle of the allocation, in Numba's IpcHandle
    # with the view's offset, as Numba's own manager makes it.
    from numba import cuda

    synchronous = devmm.LimitingAdaptor(CudaRuntimeMemoryResource(cuda0, async_alloc=False), limit_bytes=1 << 20)
    with devmm.using_memory_resource(devmm.StatisticsAdaptor(synchronous)):
        memory = plugin.memalloc(64)
    buffer = plugin._live[device_pointer(memory)]
    buffer.copy_from_host(bytes(range(64)))
    view = memory.view(16)
    handle = plugin.get_ipc_handle(view)
    assert isinstance(handle, cuda.IpcHandle)
    assert (handle.base, handle.size, handle.offset) == (view, 48, 16)
    assert handle.source_info == plugin.context.device.get_device_identity()
    data = handle_bytes(handle.handle)
    assert data == buffer.ipc_handle().handle
    # Another process opens the allocation with those bytes (cudaIpcOpenMemHandle).
    env = dict(os.environ, DEVMM_CUDART_PATH=os.environ["DEVMM_TEST_FAKE_CUDART"])
    result = subprocess.run(
        [sys.executable, "-c", OPEN_IN_CHILD, data.hex(), "64", str(os.getpid())],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert bytes.fromhex(result.stdout.strip()) == bytes(range(64))
    assert bytes(buffer.copy_to_host(nbytes=5)) == b"CHILD"
    del memory, view, handle, buffer
    gc.collect()
    plugin.deallocations.clear()
