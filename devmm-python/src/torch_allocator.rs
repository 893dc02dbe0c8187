//! PyTorch allocating through devmm: the C entry points that PyTorch's
//! `torch.cuda.memory.CUDAPluggableAllocator` calls, exported by this
//! extension module itself (no second library to ship), and the per-device
//! routes they serve.
//!
//! `devmm.integrations.torch.install` fills the routes, one counted
//! resource per CUDA ordinal, and points PyTorch at [`devmm_torch_malloc`]
//! and [`devmm_torch_free`] in this module's file. Every block PyTorch holds
//! is remembered with the route that made it, so a free goes back to the
//! resource that allocated it whatever is installed by then.

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};

use devmm::MemoryResource;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use crate::error::IntoPyResult;
use crate::resource::{resource_of, PyMemoryResource};

/// The allocation entry point's symbol, for `CUDAPluggableAllocator`.
pub(crate) const MALLOC_SYMBOL: &str = "devmm_torch_malloc";
/// The free entry point's symbol, for `CUDAPluggableAllocator`.
pub(crate) const FREE_SYMBOL: &str = "devmm_torch_free";

type Counted = devmm::StatisticsAdaptor<Arc<dyn devmm::MemoryResource>>;

/// One CUDA device's resource as PyTorch sees it: counted, so
/// `memory_stats()` reports devmm's figures for exactly PyTorch's blocks.
struct Route {
    mr: Counted,
    /// The CUDA device of PyTorch's ordinal, which its streams belong to
    /// (the resource's own device may be the managed-memory one).
    device: devmm::Device,
    /// Allocations the resource refused.
    ooms: AtomicUsize,
}

#[derive(Default)]
struct Table {
    /// By CUDA ordinal, as PyTorch names devices.
    routes: HashMap<c_int, Arc<Route>>,
    /// Every block PyTorch holds: its route and size.
    live: HashMap<usize, (Arc<Route>, usize)>,
}

fn table() -> MutexGuard<'static, Table> {
    static TABLE: LazyLock<Mutex<Table>> = LazyLock::new(Mutex::default);
    // Each update is one insert or remove: never left half-done.
    TABLE.lock().unwrap_or_else(|e| e.into_inner())
}

fn allocate(nbytes: usize, device: c_int, stream: usize) -> devmm::Result<*mut c_void> {
    let route =
        table()
            .routes
            .get(&device)
            .cloned()
            .ok_or_else(|| devmm::Error::InvalidArgument {
                reason: format!(
                    "PyTorch asked devmm for {nbytes} bytes on CUDA device {device}, which has no \
                 devmm resource; pass {{device: mr}} for every device PyTorch uses to \
                 devmm.integrations.torch.install"
                ),
            })?;
    let stream = devmm::runtime_for(route.device)?.wrap_stream(route.device, stream)?;
    // A Python-defined resource's exception has no binding to convert it
    // here: the devmm error carries it into the log instead.
    let ptr = route.mr.allocate(nbytes, &stream).inspect_err(|_| {
        route.ooms.fetch_add(1, Ordering::Relaxed);
    })?;
    if !ptr.is_null() {
        table().live.insert(ptr.addr(), (route, nbytes));
    }
    Ok(ptr.as_host_ptr())
}

fn free(ptr: *mut c_void, device: c_int, stream: usize) -> devmm::Result<()> {
    if ptr.is_null() {
        return Ok(());
    }
    let Some((route, nbytes)) = table().live.remove(&(ptr as usize)) else {
        return Err(devmm::Error::InvalidArgument {
            reason: format!(
                "PyTorch freed {ptr:?} on CUDA device {device}, which devmm's PyTorch allocator \
                 never handed out"
            ),
        });
    };
    let stream = devmm::runtime_for(route.device)?.wrap_stream(route.device, stream)?;
    // SAFETY: the block was live in the table, so `route.mr` allocated
    // it with `nbytes`, and it is removed so it is freed only once.
    unsafe {
        route
            .mr
            .deallocate(devmm::DevicePtr::from_host_ptr(ptr), nbytes, &stream)
    }
}

/// PyTorch's allocation hook: `void* alloc(size_t size, int device,
/// cudaStream_t stream)`. A failure is logged on the `devmm` logger and
/// thrown to PyTorch as `std::bad_alloc` (NULL where no C++ runtime is
/// loaded, which PyTorch never is without).
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
    let result = std::panic::catch_unwind(|| allocate(size, device, stream as usize));
    match result {
        Ok(Ok(ptr)) => return ptr,
        Ok(Err(error)) => {
            tracing::error!(target: "devmm::torch", %error, "PyTorch allocation failed");
        }
        Err(_) => tracing::error!(target: "devmm::torch", "PyTorch allocation panicked"),
    }
    // SAFETY: this function is `extern "C-unwind"`, called by PyTorch's
    // C++ hook, and outside the `catch_unwind` above.
    unsafe { crate::cxx_exception::throw_bad_alloc() };
    std::ptr::null_mut()
}

/// PyTorch's free hook: `void free(void* ptr, size_t size, int device,
/// cudaStream_t stream)`. It cannot fail: errors are logged.
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
    match std::panic::catch_unwind(|| free(ptr, device, stream as usize)) {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::error!(target: "devmm::torch", %error, "PyTorch free failed"),
        Err(_) => tracing::error!(target: "devmm::torch", "PyTorch free panicked"),
    }
}

/// Routes PyTorch's allocations on each resource's CUDA device to it.
/// Refuses non-CUDA resources, two resources for one device, and a second
/// install while one is active (`RuntimeError`).
#[pyfunction]
pub(crate) fn torch_route(resources: Vec<Bound<'_, PyMemoryResource>>) -> PyResult<()> {
    let mut routes = HashMap::new();
    for mr in &resources {
        let rust = resource_of(mr)?;
        let device = rust.device();
        if !matches!(
            device.ty(),
            devmm::DeviceType::Cuda | devmm::DeviceType::CudaManaged
        ) {
            return Err(PyValueError::new_err(format!(
                "PyTorch's CUDA allocator needs CUDA device (or managed) memory; {rust:?} \
                 allocates on {device}"
            )));
        }
        let ordinal = c_int::try_from(device.index())
            .map_err(|_| PyValueError::new_err(format!("{device} is not a CUDA ordinal")))?;
        let route = Route {
            mr: devmm::StatisticsAdaptor::new(rust),
            device: devmm::Device::try_new(devmm::DeviceType::Cuda, device.index()).py()?,
            ooms: AtomicUsize::new(0),
        };
        if routes.insert(ordinal, Arc::new(route)).is_some() {
            return Err(PyValueError::new_err(format!(
                "two resources for CUDA device {ordinal}; give PyTorch one per device"
            )));
        }
    }
    let mut table = table();
    if !table.routes.is_empty() {
        return Err(PyRuntimeError::new_err(
            "devmm already serves PyTorch's allocations; uninstall that installer first",
        ));
    }
    table.routes = routes;
    Ok(())
}

/// Stops routing new allocations; blocks PyTorch still holds go back to
/// the resources that made them when freed.
#[pyfunction]
pub(crate) fn torch_unroute() {
    // Dropping a route may run a resource's teardown (Python code, a
    // driver call): done after the table's lock is released, not under it.
    let routes = std::mem::take(&mut table().routes);
    drop(routes);
}

/// `(current, peak, total, allocations, deallocations, ooms)` of PyTorch's
/// blocks on CUDA device `device`, or `None` when devmm does not serve it.
#[pyfunction]
pub(crate) fn torch_statistics(device: i32) -> Option<(usize, usize, usize, usize, usize, usize)> {
    let route = table().routes.get(&device).cloned()?;
    let s = route.mr.statistics();
    Some((
        s.current_bytes,
        s.peak_bytes,
        s.total_bytes,
        s.allocations,
        s.deallocations,
        route.ooms.load(Ordering::Relaxed),
    ))
}

/// Starts a new peak window on CUDA device `device`; `False` when devmm
/// does not serve it.
#[pyfunction]
pub(crate) fn torch_reset_peak(device: i32) -> bool {
    let route = table().routes.get(&device).cloned();
    route.map(|r| r.mr.reset_peak()).is_some()
}
