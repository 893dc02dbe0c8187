"""One GPU smoke check of the devmm Python package, run by scripts/gpu-smoke.sh
in its own process: `python interop.py CHECK`. Prints one JSON line
{"check", "status", "detail"} and exits 0 (passed), 1 (failed) or 3
(skipped: a library the check needs is not installed; the smoke script
decides whether that is allowed).

Checks:
  info         what `devmm info --json` (in $DEVMM_SMOKE_INFO) found: at
               least one CUDA device, with its name and compute capability
  conformance  devmm's resource and DLPack conformance suites on cuda:0,
               after `import torch` has loaded its libcudart (devmm must
               reuse that copy, not map a second one)
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
import json
import os
import sys
import traceback

N = 1 << 20
# About a few hundred milliseconds of GPU time on current hardware.
SLEEP_CYCLES = int(os.environ.get("DEVMM_SMOKE_SLEEP_CYCLES", str(500_000_000)))
SKIPPED = 3


class Skip(Exception):
    """A library the check needs is missing."""


def need(module: str):
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as e:
        raise Skip(f"{module} is not installed ({e})") from e


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


def check_conformance() -> str:
    torch = need("torch")
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
    cuda = need("numba.cuda")
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
    "conformance": check_conformance,
    "conformance_without_torch": check_conformance_without_torch,
    "last_error": check_last_error,
    "torch": check_torch,
    "cupy": check_cupy,
    "jax": check_jax,
    "numba": check_numba,
}


def main() -> int:
    name = sys.argv[1]
    try:
        detail, status, code = CHECKS[name](), "passed", 0
    except Skip as e:
        detail, status, code = str(e), "skipped", SKIPPED
    except Exception as e:  # noqa: BLE001 (the report carries any failure)
        traceback.print_exc()
        detail, status, code = f"{type(e).__name__}: {e}", "failed", 1
    print(json.dumps({"check": name, "status": status, "detail": detail}))
    return code


if __name__ == "__main__":
    sys.exit(main())
