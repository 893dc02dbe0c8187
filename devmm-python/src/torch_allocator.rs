//! PyTorch allocating through devmm: the C entry points that PyTorch's
//! `torch.cuda.memory.CUDAPluggableAllocator` calls, exported by this
//! extension module itself (no second library to ship), over the core's
//! routes (`devmm::interop::TorchRoutes`), which
//! `devmm.integrations.torch.install` fills with one resource per CUDA
//! ordinal.

use std::ffi::{c_int, c_void};

use devmm::interop::TorchRoutes;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::error::IntoPyResult;
use crate::resource::{resource_of, PyMemoryResource};

/// The allocation entry point's symbol, for the `CUDAPluggableAllocator`
/// that `install` makes PyTorch's allocator.
pub(crate) const MALLOC_SYMBOL: &str = "devmm_torch_malloc";
/// The allocation entry point's symbol, for the `CUDAPluggableAllocator` a
/// `torch.cuda.MemPool` holds.
pub(crate) const POOL_MALLOC_SYMBOL: &str = "devmm_torch_pool_malloc";
/// The free entry point's symbol, for the allocator `install` makes.
pub(crate) const FREE_SYMBOL: &str = "devmm_torch_free";
/// The free entry point's symbol, for a `torch.cuda.MemPool`'s allocator.
pub(crate) const POOL_FREE_SYMBOL: &str = "devmm_torch_pool_free";
/// The `record_stream` entry point's symbol, for the allocator `install`
/// makes PyTorch's (a `torch.cuda.MemPool`'s caching allocator tracks the
/// streams its blocks are used on itself).
pub(crate) const RECORD_STREAM_SYMBOL: &str = "devmm_torch_record_stream";

/// The block PyTorch asked for (through `TorchRoutes::allocate_in_pool` for
/// a pool, else `allocate`), or `None` after logging why not on the `devmm`
/// logger. A Python-defined resource's exception has no binding to convert
/// it here: the devmm error carries its message into the log.
fn allocate_or_log(
    in_pool: bool,
    size: usize,
    device: c_int,
    stream: *mut c_void,
) -> Option<*mut c_void> {
    let allocate = if in_pool {
        TorchRoutes::allocate_in_pool
    } else {
        TorchRoutes::allocate
    };
    let result = std::panic::catch_unwind(|| allocate(size, device, stream as usize));
    match result {
        Ok(Ok(ptr)) => return Some(ptr),
        // A pool's caching allocator frees its cache and tries again, and
        // raises its own error if that fails too: only a note here.
        Ok(Err(error)) if in_pool && error.is_out_of_memory() => {
            tracing::debug!(target: "devmm::torch", %error, "PyTorch pool allocation refused");
        }
        Ok(Err(error)) => {
            tracing::error!(target: "devmm::torch", %error, "PyTorch allocation failed");
        }
        Err(_) => tracing::error!(target: "devmm::torch", "PyTorch allocation panicked"),
    }
    None
}

/// PyTorch's allocation hook when devmm is its allocator: `void* alloc(size_t
/// size, int device, cudaStream_t stream)`. A failure is thrown to PyTorch
/// as `std::bad_alloc` (NULL where no C++ runtime is loaded, which PyTorch
/// never is without): PyTorch would wrap a NULL in a tensor.
///
/// # Safety
///
/// Called by PyTorch (or a C caller that can take a C++ exception) with a
/// stream handle valid on `device`.
#[no_mangle]
pub(crate) unsafe extern "C-unwind" fn devmm_torch_malloc(
    size: usize,
    device: c_int,
    stream: *mut c_void,
) -> *mut c_void {
    if let Some(ptr) = allocate_or_log(false, size, device, stream) {
        return ptr;
    }
    // SAFETY: this function is `extern "C-unwind"`, called by PyTorch's
    // C++ hook, and outside `allocate_or_log`'s `catch_unwind`.
    unsafe { devmm::interop::throw_bad_alloc() };
    std::ptr::null_mut()
}

/// PyTorch's allocation hook in a `torch.cuda.MemPool`: as
/// [`devmm_torch_malloc`], but a failure is NULL, which PyTorch's caching
/// allocator reads as out of memory: it frees its cached blocks and tries
/// again before it raises `torch.OutOfMemoryError` (a thrown exception
/// would skip both). The caching allocator calls it with its lock held,
/// which a thread holding the GIL may wait for, so nothing here waits for
/// the GIL (`gil::under_framework_lock`): no out-of-memory hook runs, and
/// a log record is kept for a thread that may take the GIL to emit.
///
/// # Safety
///
/// Called with a stream handle valid on `device`.
#[no_mangle]
pub(crate) unsafe extern "C" fn devmm_torch_pool_malloc(
    size: usize,
    device: c_int,
    stream: *mut c_void,
) -> *mut c_void {
    crate::gil::under_framework_lock(|| allocate_or_log(true, size, device, stream))
        .unwrap_or(std::ptr::null_mut())
}

/// Frees a block PyTorch hands back, logging what went wrong: the hooks
/// cannot fail.
fn free_or_log(ptr: *mut c_void, device: c_int, stream: *mut c_void) {
    let result = std::panic::catch_unwind(|| TorchRoutes::free(ptr, device, stream as usize));
    match result {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::error!(target: "devmm::torch", %error, "PyTorch free failed"),
        Err(_) => tracing::error!(target: "devmm::torch", "PyTorch free panicked"),
    }
}

/// PyTorch's free hook when devmm is its allocator: `void free(void* ptr,
/// size_t size, int device, cudaStream_t stream)`, called with no lock of
/// PyTorch's held. It cannot fail: errors are logged.
///
/// # Safety
///
/// `ptr` came from [`devmm_torch_malloc`] and is freed once, with a stream
/// handle valid on `device`.
#[no_mangle]
pub(crate) unsafe extern "C" fn devmm_torch_free(
    ptr: *mut c_void,
    _size: usize,
    device: c_int,
    stream: *mut c_void,
) {
    free_or_log(ptr, device, stream);
}

/// PyTorch's free hook in a `torch.cuda.MemPool`: as [`devmm_torch_free`],
/// but the caching allocator calls it with its lock held (releasing its
/// cached blocks), as it does [`devmm_torch_pool_malloc`]: it waits for no
/// GIL either.
///
/// # Safety
///
/// `ptr` came from [`devmm_torch_pool_malloc`] and is freed once, with a
/// stream handle valid on `device`.
#[no_mangle]
pub(crate) unsafe extern "C" fn devmm_torch_pool_free(
    ptr: *mut c_void,
    _size: usize,
    device: c_int,
    stream: *mut c_void,
) {
    crate::gil::under_framework_lock(|| free_or_log(ptr, device, stream));
}

/// PyTorch's `record_stream` hook: `void record_stream(void* ptr,
/// cudaStream_t stream)`, for `Tensor.record_stream(stream)` and NCCL's
/// collectives: the block's free waits for the work queued on `stream` by
/// then. PyTorch calls it for every CUDA tensor: one devmm did not allocate
/// is not its to order (a debug note).
///
/// # Safety
///
/// `stream` is a stream handle valid on the block's device.
#[no_mangle]
pub(crate) unsafe extern "C" fn devmm_torch_record_stream(ptr: *mut c_void, stream: *mut c_void) {
    match std::panic::catch_unwind(|| TorchRoutes::record_stream(ptr, stream as usize)) {
        Ok(true) => {}
        Ok(false) => {
            tracing::debug!(target: "devmm::torch", ?ptr, "record_stream of memory devmm did not allocate");
        }
        Err(_) => tracing::error!(target: "devmm::torch", "PyTorch record_stream panicked"),
    }
}

/// Routes PyTorch's allocations on each resource's CUDA device to it.
/// Refuses non-CUDA resources and two resources for one device
/// (`ValueError`), and a second install while one is active (`RuntimeError`).
#[pyfunction]
pub(crate) fn torch_route(resources: Vec<Bound<'_, PyMemoryResource>>) -> PyResult<()> {
    let resources = resources.iter().map(resource_of).collect::<PyResult<_>>()?;
    if TorchRoutes::install(resources).py()? {
        Ok(())
    } else {
        Err(PyRuntimeError::new_err(
            "devmm already serves PyTorch's allocations, until the process exits (PyTorch \
             keeps the allocator it was given); give one install() every device's resource, \
             as a {device: mr} mapping",
        ))
    }
}

/// Routes PyTorch's allocations on the resource's CUDA device to it, next
/// to the routes there are; `False`, changing nothing, when devmm serves
/// the device already. Refuses non-CUDA resources (`ValueError`).
#[pyfunction]
pub(crate) fn torch_serve(resource: &Bound<'_, PyMemoryResource>) -> PyResult<bool> {
    TorchRoutes::serve(resource_of(resource)?).py()
}

/// Stops routing new allocations; blocks PyTorch still holds go back to
/// the resources that made them when freed.
#[pyfunction]
pub(crate) fn torch_unroute() {
    TorchRoutes::uninstall();
}

/// The figures of the pool below the resource serving PyTorch on CUDA
/// device `device`, or `None` when it has no pool of its own (or devmm does
/// not serve the device).
///
/// Python type: `devmm.statistics.PoolStatistics | None`
#[pyfunction]
pub(crate) fn torch_pool_statistics(
    py: Python<'_>,
    device: i32,
) -> PyResult<Option<Bound<'_, PyAny>>> {
    let Some(figures) = crate::gil::detach(py, || TorchRoutes::pool_statistics(device)) else {
        return Ok(None);
    };
    let figures = figures.py()?;
    crate::pool_statistics::pool_statistics_object(py, &figures).map(Some)
}

/// `(current, peak, total, allocations, deallocations, ooms)` of PyTorch's
/// blocks on CUDA device `device`, or `None` when devmm does not serve it.
#[pyfunction]
pub(crate) fn torch_statistics(device: i32) -> Option<(usize, usize, usize, usize, usize, usize)> {
    let t = TorchRoutes::statistics(device)?;
    let s = t.statistics;
    Some((
        s.current_bytes,
        s.peak_bytes,
        s.total_bytes,
        s.allocations,
        s.deallocations,
        t.ooms,
    ))
}

/// Starts a new peak window on CUDA device `device`; `False` when devmm
/// does not serve it.
#[pyfunction]
pub(crate) fn torch_reset_peak(device: i32) -> bool {
    TorchRoutes::reset_peak(device)
}
