//! PyTorch allocating through devmm resources: the routes that PyTorch's
//! pluggable CUDA allocator (`CUDAPluggableAllocator`) is served from.
//!
//! A binding exports two C entry points (`void* malloc(size_t, int,
//! cudaStream_t)`, `void free(void*, size_t, int, cudaStream_t)`) that call
//! [`TorchRoutes::allocate`] and [`TorchRoutes::free`]. Each CUDA ordinal
//! has one counted resource; every block PyTorch holds is remembered with
//! the route that made it, so a free goes back to the resource that
//! allocated it, whatever is routed by then.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};

use crate::adaptor::{Statistics, StatisticsAdaptor};
use crate::device::{Device, DeviceType};
use crate::error::{Error, Result};
use crate::ptr::DevicePtr;
use crate::resource::MemoryResource;

/// One CUDA device's resource as PyTorch sees it: counted, so its figures
/// are exactly PyTorch's blocks.
struct Route {
    mr: StatisticsAdaptor<Arc<dyn MemoryResource>>,
    /// The CUDA device of PyTorch's ordinal, which its streams belong to
    /// (the resource's own device may be the managed-memory one).
    device: Device,
    /// Allocations the resource refused.
    ooms: AtomicUsize,
}

impl Route {
    /// `mr` as PyTorch's resource for its CUDA ordinal; refuses memory
    /// that is not CUDA device (or managed) memory.
    fn new(mr: Arc<dyn MemoryResource>) -> Result<(i32, Self)> {
        let device = mr.device();
        if !matches!(device.ty(), DeviceType::Cuda | DeviceType::CudaManaged) {
            return Err(Error::InvalidArgument {
                reason: format!(
                    "PyTorch's CUDA allocator needs CUDA device (or managed) memory; {mr:?} \
                     allocates on {device}"
                ),
            });
        }
        let ordinal = i32::try_from(device.index()).map_err(|_| Error::InvalidArgument {
            reason: format!("{device} is not a CUDA ordinal"),
        })?;
        let route = Route {
            mr: StatisticsAdaptor::new(mr),
            device: Device::try_new(DeviceType::Cuda, device.index())?,
            ooms: AtomicUsize::new(0),
        };
        Ok((ordinal, route))
    }
}

#[derive(Default)]
struct Table {
    /// By CUDA ordinal, as PyTorch names devices.
    routes: HashMap<i32, Arc<Route>>,
    /// Every block PyTorch holds, by address.
    live: HashMap<usize, Block>,
}

/// A block PyTorch holds: its route and size, and the streams PyTorch said
/// it is used on besides its own ([`TorchRoutes::record_stream`]).
struct Block {
    route: Arc<Route>,
    nbytes: usize,
    used_on: Vec<usize>,
}

/// The process's PyTorch routes (PyTorch has one allocator per process).
///
/// ```
/// use devmm::interop::TorchRoutes;
/// // Nothing routed: PyTorch's request names a device devmm does not serve.
/// let refused = TorchRoutes::allocate(64, 0, 0).unwrap_err();
/// assert!(refused.to_string().contains("CUDA device 0, which has no devmm resource"));
/// assert!(TorchRoutes::statistics(0).is_none());
/// ```
#[derive(Debug)]
pub struct TorchRoutes;

/// What [`TorchRoutes::statistics`] reports for one CUDA device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TorchStatistics {
    /// The figures of PyTorch's blocks on the device.
    pub statistics: Statistics,
    /// Allocations the resource refused to PyTorch's allocator
    /// ([`TorchRoutes::allocate`]; a `torch.cuda.MemPool` counts its own).
    pub ooms: usize,
}

fn table() -> MutexGuard<'static, Table> {
    static TABLE: LazyLock<Mutex<Table>> = LazyLock::new(Mutex::default);
    // Each update is one insert or remove: never left half-done.
    TABLE.lock().unwrap_or_else(|e| e.into_inner())
}

impl TorchRoutes {
    /// Routes PyTorch's allocations on each resource's CUDA device to it.
    /// Refuses non-CUDA resources and two resources for one device
    /// (`InvalidArgument`); `Ok(false)`, changing nothing, while routes
    /// are installed already.
    pub fn install(resources: Vec<Arc<dyn MemoryResource>>) -> Result<bool> {
        let mut routes = HashMap::new();
        for mr in resources {
            let (ordinal, route) = Route::new(mr)?;
            if routes.insert(ordinal, Arc::new(route)).is_some() {
                return Err(Error::InvalidArgument {
                    reason: format!(
                        "two resources for CUDA device {ordinal}; give PyTorch one per device"
                    ),
                });
            }
        }
        let mut table = table();
        if !table.routes.is_empty() {
            return Ok(false);
        }
        table.routes = routes;
        Ok(true)
    }

    /// Routes PyTorch's allocations on `mr`'s CUDA device to it, next to
    /// any routes there are (for a `torch.cuda.MemPool` over devmm's
    /// entry points, which PyTorch may make at any time): the entry points
    /// are told the device, never the pool, so a device has one resource.
    /// `Ok(false)`, changing nothing, when the device is served already;
    /// memory that is not CUDA memory is refused (`InvalidArgument`).
    ///
    /// PyTorch's caching allocator calls a pool's entry points with its own
    /// lock held, and a thread holding a binding's interpreter lock may
    /// wait for that lock (to free a tensor): a chain with a link that runs
    /// code it was given ([`MemoryResource::runs_callbacks`]: a resource
    /// written in Python, a failure callback), which may wait for the
    /// interpreter lock in turn, is refused (`InvalidArgument`), whatever
    /// serves the device already.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// use devmm::interop::TorchRoutes;
    /// use devmm::{MallocMemoryResource, MemoryResource};
    /// let host: Arc<dyn MemoryResource> = Arc::new(MallocMemoryResource::new());
    /// let refused = TorchRoutes::serve(host).unwrap_err();
    /// assert!(refused.to_string().contains("needs CUDA device (or managed) memory"));
    ///
    /// use devmm::FailureCallbackAdaptor;
    /// let retrying = FailureCallbackAdaptor::new(MallocMemoryResource::new(), |_, _, _| Ok(false));
    /// let refused = TorchRoutes::serve(Arc::new(retrying)).unwrap_err();
    /// assert!(refused.to_string().contains("its link FailureCallbackAdaptor"));
    /// ```
    pub fn serve(mr: Arc<dyn MemoryResource>) -> Result<bool> {
        if let Some(link) = crate::callback_of_chain(&*mr) {
            return Err(Error::InvalidArgument {
                reason: format!(
                    "a torch.cuda.MemPool over {mr:?}: its link {link:?} runs code it was given \
                     (a resource written in Python, a failure callback), and PyTorch calls a \
                     pool's allocator with its own lock held, which a thread holding the \
                     interpreter lock may wait for: the two would wait for each other; make \
                     the pool over devmm's own resources and adaptors"
                ),
            });
        }
        let (ordinal, route) = Route::new(mr)?;
        let mut table = table();
        if table.routes.contains_key(&ordinal) {
            return Ok(false);
        }
        table.routes.insert(ordinal, Arc::new(route));
        Ok(true)
    }

    /// Stops routing new allocations; blocks PyTorch still holds go back
    /// to the resources that made them when freed.
    pub fn uninstall() {
        // Dropping a route may run a resource's teardown (a binding's
        // code, a driver call): done after the lock is released.
        let routes = std::mem::take(&mut table().routes);
        drop(routes);
    }

    /// PyTorch's allocation: `nbytes` on CUDA ordinal `device`, ordered on
    /// the native stream `stream`. A refusal runs the process's
    /// out-of-memory hooks ([`observe_allocation`](crate::observe_allocation))
    /// and counts in [`TorchStatistics::ooms`].
    pub fn allocate(nbytes: usize, device: i32, stream: usize) -> Result<*mut c_void> {
        Self::allocate_for(nbytes, device, stream, true)
    }

    /// [`allocate`](Self::allocate) for a `torch.cuda.MemPool`, whose
    /// caching allocator answers a refusal itself: it frees the blocks it
    /// caches and tries again, then counts and reports its own
    /// out-of-memory error. It calls with its lock held, so no hook runs
    /// here (a hook may wait for a lock of its own), and a refusal is not
    /// counted.
    pub fn allocate_in_pool(nbytes: usize, device: i32, stream: usize) -> Result<*mut c_void> {
        Self::allocate_for(nbytes, device, stream, false)
    }

    fn allocate_for(
        nbytes: usize,
        device: i32,
        stream: usize,
        observed: bool,
    ) -> Result<*mut c_void> {
        let route = table()
            .routes
            .get(&device)
            .cloned()
            .ok_or_else(|| Error::InvalidArgument {
                reason: format!(
                    "PyTorch asked devmm for {nbytes} bytes on CUDA device {device}, which has no \
                     devmm resource; pass {{device: mr}} for every device PyTorch uses to \
                     devmm.integrations.torch.install"
                ),
            })?;
        let stream = crate::runtime_for(route.device)?.wrap_stream(route.device, stream)?;
        let ptr = if observed {
            crate::observe_allocation(|| route.mr.allocate(nbytes, &stream)).inspect_err(|_| {
                route.ooms.fetch_add(1, Ordering::Relaxed);
            })?
        } else {
            route.mr.allocate(nbytes, &stream)?
        };
        if !ptr.is_null() {
            let block = Block {
                route,
                nbytes,
                used_on: Vec::new(),
            };
            table().live.insert(ptr.addr(), block);
        }
        Ok(ptr.as_host_ptr())
    }

    /// PyTorch's `record_stream`: the block at `ptr` is used on the native
    /// stream `stream` too, so its free waits for the work queued there by
    /// then, as PyTorch's own allocators do (`Tensor.record_stream`, NCCL's
    /// collectives): a stream-ordered resource could hand the memory out
    /// again on the allocation stream while that stream still reads it.
    /// PyTorch asks this for every CUDA tensor, its imports (`from_dlpack`,
    /// `from_blob`) included: a pointer devmm never handed out is not its
    /// to order, and `false` says so, as PyTorch's own allocator ignores
    /// such a block.
    pub fn record_stream(ptr: *mut c_void, stream: usize) -> bool {
        let mut table = table();
        let Some(block) = table.live.get_mut(&(ptr as usize)) else {
            return false;
        };
        if !block.used_on.contains(&stream) {
            block.used_on.push(stream);
        }
        true
    }

    /// PyTorch's free of `ptr` (from [`allocate`](Self::allocate)) on CUDA
    /// ordinal `device`, ordered on `stream` after the work queued so far on
    /// the streams [recorded](Self::record_stream) for it. A pointer devmm
    /// never handed out is refused.
    pub fn free(ptr: *mut c_void, device: i32, stream: usize) -> Result<()> {
        if ptr.is_null() {
            return Ok(());
        }
        let Some(block) = table().live.remove(&(ptr as usize)) else {
            return Err(Error::InvalidArgument {
                reason: format!(
                    "PyTorch freed {ptr:?} on CUDA device {device}, which devmm's PyTorch \
                     allocator never handed out"
                ),
            });
        };
        let route = block.route;
        let stream = crate::runtime_for(route.device)?.wrap_stream(route.device, stream)?;
        for &other in block.used_on.iter().filter(|&&s| s != stream.handle()) {
            match stream.wait_raw(other) {
                Ok(()) => {}
                // A capture the wait would break: the block stays unfreed
                // (a leak) rather than reused under the capture's work.
                Err(error @ Error::StreamCapture { .. }) => return Err(error),
                Err(error) => {
                    // A stream this one cannot wait on, of another device
                    // (peer access, a collective): every device's work is
                    // waited for, the stream's among it.
                    tracing::debug!(target: "devmm::torch", %error, "waiting for a recorded stream");
                    let rt = crate::runtime_for(route.device)?;
                    let gpus = rt
                        .devices()?
                        .into_iter()
                        .filter(|d| d.ty() == DeviceType::Cuda);
                    for device in gpus {
                        rt.default_stream(device)?.synchronize_device()?;
                    }
                }
            }
        }
        // SAFETY: the block was live in the table, so `route.mr` allocated
        // it with `nbytes`, and it is removed so it is freed only once.
        unsafe {
            route
                .mr
                .deallocate(DevicePtr::from_host_ptr(ptr), block.nbytes, &stream)
        }
    }

    /// The figures of PyTorch's blocks on CUDA ordinal `device`, or `None`
    /// when devmm does not serve it.
    pub fn statistics(device: i32) -> Option<TorchStatistics> {
        let route = table().routes.get(&device).cloned()?;
        Some(TorchStatistics {
            statistics: route.mr.statistics(),
            ooms: route.ooms.load(Ordering::Relaxed),
        })
    }

    /// The figures of the pool below the resource serving CUDA ordinal
    /// `device`, when a link of its chain has a pool of its own (what
    /// PyTorch calls reserved memory); `None` otherwise.
    pub fn pool_statistics(device: i32) -> Option<Result<crate::PoolStatistics>> {
        let route = table().routes.get(&device).cloned()?;
        crate::pool_of_chain(&route.mr).map(|(_, figures)| figures)
    }

    /// Starts a new peak window on CUDA ordinal `device`; `false` when
    /// devmm does not serve it.
    pub fn reset_peak(device: i32) -> bool {
        let route = table().routes.get(&device).cloned();
        route.map(|r| r.mr.reset_peak()).is_some()
    }
}
