"""One GPU smoke check of the devmm Python package, run by scripts/gpu-smoke.sh
in its own process: `python interop.py CHECK`. Prints one JSON line
{"check", "status", "detail"} and exits 0 (passed), 1 (failed) or 3
(skipped: a library the check needs is not installed, reported as "not
installed: NAME"; a library that is installed but fails to import fails).
With DEVMM_SMOKE_REHEARSAL=1 (a rehearsal over the fake runtime) the
framework checks only say whether their libraries are installed: they need
a real driver.

Checks:
  info         what `devmm info --json` (in $DEVMM_SMOKE_INFO) found: at
               least one CUDA device, with its name and compute capability
  cudart_wheel the libcudart pip installed into this Python
               (nvidia-cuda-runtime) is what discovery finds with this
               interpreter's prefix ($DEVMM_SMOKE_DEVMM names the command)
  conformance  devmm's resource and DLPack conformance suites on cuda:0,
               after `import torch` has loaded its libcudart (devmm must
               reuse that copy, not map a second one); without torch, the
               suites alone
  last_error   an out-of-memory devmm handled leaves no error in the
               runtime's last-error state (cudaGetLastError)
  torch, cupy, jax, numba
               a devmm tensor exported to the library on a non-default
               stream, with a long kernel (torch.cuda._sleep) queued before
               the export and before the release: the values the library
               computes must be right even when the freed memory is reused
               at once
"""

import ctypes
import glob
import importlib
import importlib.util
import json
import os
import site
import subprocess
import sys
import traceback

N = 1 << 20
# About a few hundred milliseconds of GPU time on current hardware.
SLEEP_CYCLES = int(os.environ.get("DEVMM_SMOKE_SLEEP_CYCLES", str(500_000_000)))
SKIPPED = 3


class Skip(Exception):
    """A library the check needs is missing."""


REHEARSAL = os.environ.get("DEVMM_SMOKE_REHEARSAL") == "1"


def need(module: str, package: str | None = None):
    """`module`, imported; Skip when its distribution (`package`, the
    module's top-level package by default) is not installed. An installed
    one that fails to import raises its ImportError: that is a failure."""
    top = package or module.split(".")[0]
    if importlib.util.find_spec(top) is None:
        raise Skip(f"not installed: {top}")
    return importlib.import_module(module)


def pip_libcudart() -> list[str]:
    """The libcudart files pip's CUDA wheels put into this Python's
    site-packages (nvidia/cu13/lib, nvidia/cuda_runtime/lib, ...)."""
    dirs = [*site.getsitepackages(), site.getusersitepackages()]
    found = (glob.glob(os.path.join(d, "nvidia", "*", "lib", "libcudart.so.*")) for d in dirs)
    return sorted({path for paths in found for path in paths})


def devmm_gpu():
    import devmm

    gpu = devmm.Device.from_string("cuda:0")
    return devmm, gpu, devmm.runtime_for(gpu)


def filled(devmm, gpu, stream=None):
    np = need("numpy")
    t = devmm.empty((N,), "float32", device=gpu, stream=stream)
    t.buffer.copy_from_host(np.arange(N, dtype=np.float32).tobytes())
    return t


def expected():
    np = need("numpy")
    return np.arange(N, dtype=np.float32) * 2


def reuse_freed_memory(devmm, gpu, stream):
    """Allocates and zero-fills, on the producer's stream, what the freed
    export may have held (the stream-ordered pool hands freed memory back
    to the same stream at once): if the release was not ordered after the
    consumer's stream, the consumer reads zeros."""
    np = need("numpy")
    again = devmm.empty((N,), "float32", device=gpu, stream=stream)
    again.buffer.copy_from_host(np.zeros(N, dtype=np.float32).tobytes())
    return again


def sleep_on(stream_ptr: int) -> None:
    """A long kernel on the stream `stream_ptr`, through PyTorch."""
    torch = need("torch")
    with torch.cuda.stream(torch.cuda.ExternalStream(stream_ptr)):
        torch.cuda._sleep(SLEEP_CYCLES)


def check_info() -> str:
    with open(os.environ["DEVMM_SMOKE_INFO"]) as f:
        report = json.load(f)
    devices = [d for d in report["devices"] if d["runtime"] == "cuda"]
    if not devices:
        raise AssertionError(f"devmm info found no CUDA device: {report['runtimes']}")
    return "; ".join(
        f"{d['device']} {d.get('name')} cc {d.get('compute_capability')} {d.get('pci_bus_id')} "
        f"pools={d.get('memory_pools')} used {d.get('used_bytes')} of {d.get('total_bytes')}"
        for d in devices
    )


def check_cudart_wheel() -> str:
    wheel = pip_libcudart()
    if not wheel:
        raise Skip(f"not installed: no libcudart from pip (nvidia-cuda-runtime) in {sys.prefix}")
    # Only this interpreter's prefix: no install root, no named library.
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH", "DEVMM_CUDART_PATH")}
    env["VIRTUAL_ENV"] = sys.prefix
    info = subprocess.run(
        [os.environ["DEVMM_SMOKE_DEVMM"], "info", "--json"], env=env, capture_output=True, text=True, check=True, timeout=30
    )
    cuda = next(r for r in json.loads(info.stdout)["runtimes"] if r["name"] == "cuda")
    if cuda["available"]:
        library = cuda.get("library", "?")
        if library not in wheel:
            # The loader's or the toolkit's copy came first: the wheel's was
            # not what discovery took, so this run says nothing of it.
            raise Skip(f"discovery took {library}, found before pip's ({', '.join(wheel)})")
        return f"CUDA runtime {library} (this Python's pip wheel)"
    reason = cuda.get("reason", "")
    reached = [path for path in wheel if path in reason]
    if REHEARSAL and reached:
        return f"discovery reached {reached[0]}, which has no driver here: {reason}"
    raise AssertionError(f"with this Python's prefix {sys.prefix}, devmm found no usable libcudart (pip's: {wheel}): {reason}")


def check_conformance() -> str:
    try:
        torch = need("torch")
    except Skip as e:
        return f"{check_conformance_without_torch()} ({e}: the one-libcudart check needs it)"
    torch.zeros(1, device="cuda")  # torch's libcudart is loaded and initialised
    devmm, gpu, rt = devmm_gpu()
    import devmm.mrs.cuda as mrs
    import devmm.testing

    devmm.testing.mr_conformance(mrs.CudaRuntimeMemoryResource)
    devmm.testing.dlpack_conformance(gpu)
    with open("/proc/self/maps") as maps:
        copies = {line.split()[-1] for line in maps if "libcudart.so" in line}
    if len(copies) != 1:
        raise AssertionError(f"devmm mapped a second libcudart next to torch's: {sorted(copies)}")
    return f"mr and DLPack conformance passed over {copies.pop()}"


def check_conformance_without_torch() -> str:
    devmm, gpu, rt = devmm_gpu()
    import devmm.mrs.cuda as mrs
    import devmm.testing

    devmm.testing.mr_conformance(mrs.CudaRuntimeMemoryResource)
    devmm.testing.dlpack_conformance(gpu)
    return "mr and DLPack conformance passed"


def check_last_error() -> str:
    devmm, gpu, rt = devmm_gpu()
    library = os.environ.get("DEVMM_SMOKE_CUDART") or "libcudart.so"
    # The same library devmm loaded: dlopen of a loaded file returns it.
    cudart = ctypes.CDLL(library)
    if cudart.cudaGetLastError() != 0:
        raise AssertionError("an error was pending before the check")
    try:
        devmm.empty((1 << 46,), "uint8", device=gpu)
    except MemoryError:
        pass
    else:
        raise AssertionError("allocating 64 TiB did not raise MemoryError")
    peeked = cudart.cudaPeekAtLastError()
    if peeked != 0:
        raise AssertionError(f"devmm left error {peeked} in the runtime's last-error state")
    return f"MemoryError raised, cudaPeekAtLastError() == 0 ({library})"


def _ipc_child(descriptor, conn) -> None:
    import devmm

    shared = devmm.DeviceBuffer.from_ipc_descriptor(descriptor)
    conn.send(bytes(shared.copy_to_host()))
    shared.copy_from_host(b"child")
    shared.free()
    conn.send("freed")


def check_ipc() -> str:
    """Issue 30: a buffer of an IPC-enabled pool, mapped by a second process
    started with spawn; both read and write the same bytes."""
    import multiprocessing as mp

    import devmm.mrs.cuda

    devmm, gpu, rt = devmm_gpu()
    mr = devmm.mrs.cuda.CudaAsyncMemoryResource(gpu, enable_ipc=True)
    buf = devmm.DeviceBuffer.to_device(b"parent", mr=mr)
    ctx = mp.get_context("spawn")
    parent, end = ctx.Pipe()
    child = ctx.Process(target=_ipc_child, args=(buf.ipc_descriptor(), end), daemon=True)
    child.start()
    seen = parent.recv()
    if seen != b"parent":
        raise AssertionError(f"the child read {seen!r}, not b'parent'")
    if parent.recv() != "freed":
        raise AssertionError("the child did not free its mapping")
    child.join(60)
    if child.exitcode != 0:
        raise AssertionError(f"the child exited with {child.exitcode}")
    back = bytes(buf.copy_to_host())
    if back != b"childt":
        raise AssertionError(f"the parent reads {back!r} after the child's write, not b'childt'")
    buf.free()
    return "a spawned process mapped, read and wrote a 6-byte buffer; the parent saw its write"


def check_torch() -> str:
    torch = need("torch")
    devmm, gpu, rt = devmm_gpu()
    # A created devmm stream and a torch pool stream (non-blocking): neither
    # is ordered with the other, or with the legacy stream, implicitly.
    producer = rt.create_stream(gpu)
    t = filled(devmm, gpu, producer)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(SLEEP_CYCLES)  # before the export: the import must wait for devmm
        x = torch.from_dlpack(t)  # torch passes stream=s
        y = x * 2
        torch.cuda._sleep(SLEEP_CYCLES)  # before the release
        del x
    t.buffer.free()
    del t
    reuse_freed_memory(devmm, gpu, producer)
    s.synchronize()
    got = y.cpu().numpy()
    if not (got == expected()).all():
        raise AssertionError("torch read memory devmm had released, or stale data")
    return "torch.from_dlpack on a non-default stream, sleeps around export and release"


def check_cupy() -> str:
    cp = need("cupy")
    need("torch")
    devmm, gpu, rt = devmm_gpu()
    producer = rt.create_stream(gpu)
    t = filled(devmm, gpu, producer)
    s = cp.cuda.Stream(non_blocking=True)
    sleep_on(s.ptr)
    with s:
        x = cp.from_dlpack(t)  # cupy passes stream=s
        y = x * 2
    sleep_on(s.ptr)
    del x
    t.buffer.free()
    del t
    reuse_freed_memory(devmm, gpu, producer)
    s.synchronize()
    if not (cp.asnumpy(y) == expected()).all():
        raise AssertionError("cupy read memory devmm had released, or stale data")
    return "cupy.from_dlpack on a non-blocking stream, sleeps around export and release"


def check_jax() -> str:
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    jax = need("jax")
    np = need("numpy")
    if not any(importlib.util.find_spec(p) for p in ("jax_cuda13_plugin", "jax_cuda12_plugin")):
        raise Skip("not installed: jax's CUDA plugin (jax[cuda13] or jax[cuda12])")
    devmm, gpu, rt = devmm_gpu()
    if not any(d.platform == "gpu" for d in jax.devices()):
        raise AssertionError(f"jax sees no GPU: {jax.devices()}")
    t = filled(devmm, gpu)
    x = jax.dlpack.from_dlpack(t)
    y = np.asarray(x * 2)
    del x
    t.buffer.free()
    if not (y == expected()).all():
        raise AssertionError("jax computed wrong values from the devmm export")
    return "jax.dlpack.from_dlpack round trip"


def check_numba() -> str:
    cuda = need("numba.cuda", "numba_cuda")
    devmm, gpu, rt = devmm_gpu()
    t = filled(devmm, gpu)
    if hasattr(cuda, "from_dlpack"):
        x = cuda.from_dlpack(t)
        how = "numba.cuda.from_dlpack"
    elif hasattr(t, "__cuda_array_interface__"):
        x = cuda.as_cuda_array(t)
        how = "numba.cuda.as_cuda_array"
    else:
        raise Skip("numba-cuda has no DLPack import and devmm tensors no __cuda_array_interface__ yet")
    got = x.copy_to_host()
    del x
    t.buffer.free()
    if not (got * 2 == expected()).all():
        raise AssertionError("numba read wrong values from the devmm export")
    return f"{how} round trip"


CHECKS = {
    "info": check_info,
    "cudart_wheel": check_cudart_wheel,
    "conformance": check_conformance,
    "conformance_without_torch": check_conformance_without_torch,
    "last_error": check_last_error,
    "ipc": check_ipc,
    "torch": check_torch,
    "cupy": check_cupy,
    "jax": check_jax,
    "numba": check_numba,
}


#: The libraries each framework check needs, by distribution name.
FRAMEWORKS = {"torch": ("torch",), "cupy": ("cupy", "torch"), "jax": ("jax",), "numba": ("numba_cuda",)}


def rehearse(name: str) -> str:
    """A framework check in a rehearsal: installed or not, it is skipped
    (nothing is imported: an import may need the driver)."""
    missing = [p for p in FRAMEWORKS[name] if importlib.util.find_spec(p) is None]
    if missing:
        raise Skip(f"not installed: {', '.join(missing)}")
    raise Skip(f"hardware only: {', '.join(FRAMEWORKS[name])} installed, needs a real driver")


def main() -> int:
    name = sys.argv[1]
    try:
        check = (lambda: rehearse(name)) if REHEARSAL and name in FRAMEWORKS else CHECKS[name]
        detail, status, code = check(), "passed", 0
    except Skip as e:
        detail, status, code = str(e), "skipped", SKIPPED
    except Exception as e:  # noqa: BLE001 (the report carries any failure)
        traceback.print_exc()
        detail, status, code = f"{type(e).__name__}: {e}", "failed", 1
    print(json.dumps({"check": name, "status": status, "detail": detail}))
    return code


if __name__ == "__main__":
    sys.exit(main())
