//! The GPU memory resources, written once for both platforms: device memory
//! (stream-ordered when the driver has `*MallocAsync`), pinned host memory
//! and managed memory. `devmm::mrs::cuda` and `devmm::mrs::rocm` name them.

use std::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use crate::device::{Device, DeviceType};
use crate::error::{Error, Result};
use crate::ipc_data::IpcMemHandle;
use crate::managed_memory::ManagedMemory;
use crate::pool_statistics::PoolStatistics;
use crate::ptr::DevicePtr;
use crate::resource::{MemoryInfo, MemoryResource, resource_chain};
use crate::runtime::driver::Driver;
use crate::stream::Stream;

use super::graph_blocks::GraphBlocks;
use super::owned_pool::OwnedPool;
use super::result::memory::Allocator;
use super::{GpuRuntime, Platform, PlatformResources, device, result};

/// The alignment every GPU resource guarantees: what `cudaMalloc` and
/// `hipMalloc` document, and what pinned and managed allocations meet.
///
/// ```
/// assert_eq!(devmm::mrs::cuda::GPU_ALIGNMENT, 256);
/// ```
pub const GPU_ALIGNMENT: usize = 256;

/// Which memory a [`GpuMemory`] hands out.
pub trait Kind: Send + Sync + 'static {
    /// The resource among platform `resources`.
    fn shipped(resources: PlatformResources) -> crate::ShippedResource;
    /// The device type its memory has on platform `P`.
    fn device_type<P: Platform>() -> DeviceType;
    /// The memory as managed memory, when it is.
    fn managed<P: Platform>(_memory: &GpuMemory<P, Self>) -> Option<&dyn ManagedMemory>
    where
        Self: Sized,
    {
        None
    }
}

/// Device memory (`cudaMalloc`, `cudaMallocAsync`).
#[derive(Debug)]
pub enum DeviceKind {}
/// Pinned host memory (`cudaMallocHost`).
#[derive(Debug)]
pub enum PinnedKind {}
/// Managed memory (`cudaMallocManaged`).
#[derive(Debug)]
pub enum ManagedKind {}

impl Kind for DeviceKind {
    fn shipped(resources: PlatformResources) -> crate::ShippedResource {
        resources.device
    }
    fn device_type<P: Platform>() -> DeviceType {
        P::DEVICE
    }
}

impl Kind for PinnedKind {
    fn shipped(resources: PlatformResources) -> crate::ShippedResource {
        resources.pinned
    }
    fn device_type<P: Platform>() -> DeviceType {
        P::HOST
    }
}

impl Kind for ManagedKind {
    fn shipped(resources: PlatformResources) -> crate::ShippedResource {
        resources.managed
    }
    fn device_type<P: Platform>() -> DeviceType {
        P::MANAGED
    }
    fn managed<P: Platform>(memory: &GpuMemory<P, Self>) -> Option<&dyn ManagedMemory> {
        Some(memory)
    }
}

/// A memory resource over a GPU driver's allocator. Use it through its
/// platform names: `devmm::mrs::cuda::CudaRuntimeMemoryResource` and
/// friends.
///
/// ```
/// use devmm::mrs::cuda::CudaRuntimeMemoryResource;
/// // A CUDA resource refuses a host device, whether or not CUDA is here.
/// let refused = CudaRuntimeMemoryResource::new(devmm::Device::CPU);
/// assert!(matches!(refused, Err(devmm::Error::InvalidArgument { .. })));
/// ```
pub struct GpuMemory<P: Platform, K: Kind> {
    driver: Arc<Driver<P>>,
    device: Device,
    allocator: Allocator,
    kind: PhantomData<K>,
    /// The pool of pinned host memory this resource made and allocates
    /// from (`Allocator::HostPool`), destroyed when it drops.
    host_pool: Option<OwnedPool<P>>,
    /// Managed memory on a device without concurrent managed access: the
    /// host touches it only while the device is idle.
    host_waits_for_device: bool,
    /// Blocks allocated on a capturing stream (allocation nodes of its
    /// graph), which a free within the same capture may free.
    graph_blocks: GraphBlocks,
}

/// Whose graph allocated a block freed on a capturing stream.
enum GraphFree {
    /// The capture's own: the free is the graph's free node.
    Own,
    /// No graph's: memory from before the capture.
    Outside,
    /// Another capture's graph.
    OtherGraph,
    /// A graph's, freed on a stream of another device.
    OtherDevice,
    /// Any, freed on the legacy stream while a blocking stream captures.
    Legacy,
}

impl<P: Platform, K: Kind> GpuMemory<P, K> {
    /// Which resource this is. Out of a pool of its own, it is the pool
    /// resource's allocator: its misuses and errors name that resource.
    fn shipped_resource(&self) -> crate::ShippedResource {
        match self.allocator {
            Allocator::FromPool(_) => P::RESOURCES.pool,
            _ => K::shipped(P::RESOURCES),
        }
    }

    /// The device a resource of this kind is made on when none is named:
    /// the first of its type.
    ///
    /// ```
    /// use devmm::mrs::cuda::{CudaPinnedMemoryResource, CudaRuntimeMemoryResource};
    /// assert_eq!(CudaRuntimeMemoryResource::default_device().to_string(), "cuda:0");
    /// assert_eq!(CudaPinnedMemoryResource::default_device().to_string(), "cuda_host:0");
    /// ```
    pub fn default_device() -> Device {
        Device::new(K::device_type::<P>(), 0)
    }

    /// Refuses a device of another kind than this resource's.
    fn check_kind(device: Device) -> Result<()> {
        let wanted = K::device_type::<P>();
        if device.ty() == wanted {
            return Ok(());
        }
        Err(Error::InvalidArgument {
            reason: format!(
                "{} serves {wanted} devices, not {device}; pass a {wanted} device",
                K::shipped(P::RESOURCES)
            ),
        })
    }

    /// The process-wide runtime, for a resource on `device`: a device of
    /// the wrong kind is refused first, so the mistake is named even on a
    /// machine without the driver.
    fn runtime_for(device: Device) -> Result<Arc<GpuRuntime<P>>> {
        Self::check_kind(device)?;
        GpuRuntime::<P>::load()
    }

    fn build(rt: &GpuRuntime<P>, device: Device, allocator: Allocator) -> Result<Self> {
        Self::check_kind(device)?;
        rt.check(device)?;
        Ok(GpuMemory {
            driver: Arc::clone(rt.driver()),
            device,
            allocator,
            kind: PhantomData,
            host_pool: None,
            host_waits_for_device: false,
            graph_blocks: GraphBlocks::default(),
        })
    }

    pub(super) fn driver(&self) -> &Arc<Driver<P>> {
        &self.driver
    }

    /// Whether the host touches this (managed) memory only while the
    /// device is idle.
    pub(super) fn host_waits_for_device(&self) -> bool {
        self.host_waits_for_device
    }

    /// Whether a host pool's block can be ordered on `stream`: a stream of
    /// this runtime on the device with this resource's index (the pinned
    /// device's streams, the GPU's), which the driver knows, and whose
    /// handle means that stream on this thread (not another thread's
    /// per-thread default stream).
    fn orders_on(&self, stream: &Stream) -> bool {
        let on = stream.device();
        matches!(self.allocator, Allocator::HostPool(_))
            && P::DEVICE_TYPES.contains(&on.ty())
            && on.index() == self.device.index()
            && stream.is_usable_here()
    }

    /// Whose graph allocated `ptr`, for a free of it on `stream`, which is
    /// capturing: the free node of a block its own capture allocated is
    /// asked on a stream of this device in that capture
    /// (`*StreamGetCaptureInfo`'s id).
    fn graph_free(&self, ptr: DevicePtr, stream: &Stream) -> Result<GraphFree> {
        if result::stream::is_legacy::<P>(stream.handle()) {
            // Capturing means a blocking stream's capture binds it: asked
            // for its capture, the driver would answer an error.
            return Ok(GraphFree::Legacy);
        }
        let Some(allocated_in) = self.graph_blocks.capture_of(ptr.addr()) else {
            return Ok(GraphFree::Outside);
        };
        if stream.device() != self.device {
            return Ok(GraphFree::OtherDevice);
        }
        let _active = device::activate(&self.driver, self.device)?;
        let capture = result::stream::capture_id(&self.driver, self.device, stream.handle())?;
        Ok(match capture == Some(allocated_in) {
            true => GraphFree::Own,
            false => GraphFree::OtherGraph,
        })
    }

    fn out_of_memory(&self, nbytes: usize, call: &'static str, status: i32) -> Error {
        let driver = result::driver_error(&self.driver, call, status, Some(self.device));
        if status == P::ERROR_OUT_OF_MEMORY {
            Error::OutOfMemory {
                device: self.device,
                nbytes,
                chain: resource_chain(self),
                detail: Some(driver.to_string()),
                pool: None,
            }
        } else {
            driver
        }
    }
}

impl<P: Platform> GpuMemory<P, DeviceKind> {
    /// Device memory on `device` from the process-wide runtime:
    /// stream-ordered (`*MallocAsync`) when the driver has it.
    pub fn new(device: Device) -> Result<Self> {
        Self::with_runtime(&*Self::runtime_for(device)?, device)
    }

    /// Device memory on `device` from `rt`, stream-ordered when it can be:
    /// the library has `*MallocAsync` and the device supports memory pools
    /// (else `*Malloc`). It allocates from the device's default pool and
    /// changes none of its settings: that pool is shared with every library
    /// in the process. A resource that wants its own release threshold uses
    /// a pool of its own (`CudaAsyncMemoryResource`).
    pub fn with_runtime(rt: &GpuRuntime<P>, device: Device) -> Result<Self> {
        let ordered = device.ty() == P::DEVICE
            && rt.has_stream_ordered_allocation()
            && rt.pools_supported(device)?;
        let allocator = if ordered {
            Allocator::DeviceAsync
        } else {
            Allocator::Device
        };
        GpuMemory::build(rt, device, allocator)
    }

    /// Device memory on `device` from `rt` out of `pool`, a pool the caller
    /// made there and keeps alive while this resource is used.
    pub(crate) fn from_pool(rt: &GpuRuntime<P>, device: Device, pool: usize) -> Result<Self> {
        GpuMemory::build(rt, device, Allocator::FromPool(pool))
    }

    /// Device memory on `device` from `rt` through the synchronous
    /// allocator (`cudaMalloc`) even where the stream-ordered one exists.
    pub fn synchronous(rt: &GpuRuntime<P>, device: Device) -> Result<Self> {
        GpuMemory::build(rt, device, Allocator::Device)
    }

    /// Device memory on `device` from the process-wide runtime through the
    /// allocator `async_alloc` names: `Some(true)` the stream-ordered one
    /// (an [`Error::InvalidArgument`] where the library or the device has
    /// none), `Some(false)` the synchronous one, `None` whichever
    /// [`new`](Self::new) picks.
    pub fn with_async_alloc(device: Device, async_alloc: Option<bool>) -> Result<Self> {
        let rt = Self::runtime_for(device)?;
        let memory = match async_alloc {
            Some(false) => return Self::synchronous(&rt, device),
            _ => Self::with_runtime(&rt, device)?,
        };
        if async_alloc == Some(true) && memory.allocator != Allocator::DeviceAsync {
            return Err(Error::InvalidArgument {
                reason: format!(
                    "async_alloc=True asks for stream-ordered allocation, which {device} does not \
                     have here (the library lacks it, or the device has no memory pools); pass \
                     async_alloc=\"auto\" or False"
                ),
            });
        }
        Ok(memory)
    }
}

impl<P: Platform> GpuMemory<P, PinnedKind> {
    /// Pinned host memory (a `*_host` device) from the process-wide runtime.
    pub fn new(device: Device) -> Result<Self> {
        Self::with_runtime(&*Self::runtime_for(device)?, device)
    }

    /// Pinned host memory from `rt`: stream-ordered, from a pool of pinned
    /// host memory the resource makes (`cudaMemPoolCreate` with a host
    /// location, every GPU given access), where the runtime has such pools
    /// (CUDA 12.2 on), the first GPU says it takes them and the driver makes
    /// one; else `cudaMallocHost` / `hipHostMalloc`.
    /// [`uses_host_pool`](Self::uses_host_pool) says which.
    pub fn with_runtime(rt: &GpuRuntime<P>, device: Device) -> Result<Self> {
        let mut memory = GpuMemory::build(rt, device, Allocator::Pinned)?;
        if P::HOST_POOLS_SINCE.is_none() {
            return Ok(memory);
        }
        let version = result::version::get(rt.driver())?.0;
        let _active = device::activate(rt.driver(), device)?;
        match result::pool::create_host(rt.driver(), device, version) {
            Ok(Some(handle)) => {
                memory.allocator = Allocator::HostPool(handle);
                let driver = Arc::clone(rt.driver());
                memory.host_pool = Some(OwnedPool::new(driver, device, handle));
            }
            Ok(None) => {}
            // A driver that has the calls but refuses a host pool (no
            // host NUMA pools on this system) still pins through the
            // synchronous allocator.
            Err(e) => {
                tracing::debug!(target: "devmm::runtime", error = %e, "no pool of pinned host memory; using the synchronous pinned allocator");
            }
        }
        Ok(memory)
    }

    /// Whether the memory comes from a stream-ordered pool of pinned host
    /// memory the resource made (`cudaMemPoolCreate` with a host location,
    /// CUDA 12.2 on) rather than `cudaMallocHost` / `hipHostMalloc`. Its
    /// allocations and frees are then ordered on the stream they are given
    /// when it is a stream of this runtime on the same device index, so the
    /// host touches a block after its stream has reached the allocation; on
    /// any other stream a block is allocated on the default stream and
    /// waited for, and a free waits for the stream first.
    ///
    /// ```no_run
    /// use devmm::mrs::cuda::CudaPinnedMemoryResource;
    /// use devmm::{Device, DeviceType, MemoryResource};
    /// let mr = CudaPinnedMemoryResource::new(Device::new(DeviceType::CudaHost, 0))?;
    /// assert_eq!(mr.stream_ordered(), mr.uses_host_pool());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn uses_host_pool(&self) -> bool {
        matches!(self.allocator, Allocator::HostPool(_))
    }

    /// Unpins unused memory of the host pool until `keep_bytes` stay
    /// reserved (never memory live blocks use). The pool keeps freed
    /// blocks pinned for the next allocation, since pinning is slow; this
    /// hands them back, as PyTorch's host cache is emptied; a block freed on
    /// a stream is kept until its free is reached there, so synchronize
    /// first to unpin it too. Without a host pool there is nothing kept:
    /// `cudaFreeHost` unpins at once.
    ///
    /// ```no_run
    /// use devmm::mrs::cuda::CudaPinnedMemoryResource;
    /// use devmm::{Device, DeviceType};
    /// let mr = CudaPinnedMemoryResource::new(Device::new(DeviceType::CudaHost, 0))?;
    /// mr.trim(0)?; // unpin every freed block the pool keeps
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn trim(&self, keep_bytes: usize) -> Result<()> {
        match &self.host_pool {
            Some(pool) => result::pool::trim(&pool.driver, self.device, pool.handle, keep_bytes),
            None => Ok(()),
        }
    }

    /// Resets the host pool's high-water marks to its current figures, as
    /// [`CudaAsyncMemoryResource::reset_pool_high_water`] does for a device
    /// pool. Without a host pool there are no marks, and this does
    /// nothing.
    ///
    /// [`CudaAsyncMemoryResource::reset_pool_high_water`]: crate::mrs::cuda::CudaAsyncMemoryResource::reset_pool_high_water
    ///
    /// ```no_run
    /// use devmm::mrs::cuda::CudaPinnedMemoryResource;
    /// use devmm::{Device, DeviceType, MemoryResource};
    /// let mr = CudaPinnedMemoryResource::new(Device::new(DeviceType::CudaHost, 0))?;
    /// mr.reset_pool_high_water()?;
    /// if let Some(figures) = mr.pool_statistics().transpose()? {
    ///     assert_eq!(figures.used_high_bytes, figures.used_bytes);
    /// }
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn reset_pool_high_water(&self) -> Result<()> {
        match &self.host_pool {
            Some(pool) => result::pool::reset_high_water(&pool.driver, self.device, pool.handle),
            None => Ok(()),
        }
    }
}

impl<P: Platform> GpuMemory<P, ManagedKind> {
    /// Managed memory from the process-wide runtime.
    pub fn new(device: Device) -> Result<Self> {
        Self::with_runtime(&*Self::runtime_for(device)?, device)
    }

    /// Managed memory from `rt`.
    pub fn with_runtime(rt: &GpuRuntime<P>, device: Device) -> Result<Self> {
        let mut memory = GpuMemory::build(rt, device, Allocator::Managed)?;
        // Read once; a device that cannot say is taken not to allow it,
        // which costs a wider wait, never a fault.
        let gpu = Device::new(P::DEVICE, device.index());
        memory.host_waits_for_device =
            result::device::attribute(rt.driver(), P::ATTR_CONCURRENT_MANAGED_ACCESS, gpu)
                .map_or(true, |concurrent| concurrent == 0);
        Ok(memory)
    }
}

impl<P: Platform, K: Kind> fmt::Debug for GpuMemory<P, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.shipped_resource();
        write!(
            f,
            "{name}(device={}, alignment={GPU_ALIGNMENT}",
            self.device
        )?;
        match self.allocator {
            Allocator::DeviceAsync => f.write_str(", stream_ordered=true")?,
            Allocator::HostPool(_) => f.write_str(", host_pool=true")?,
            _ => {}
        }
        f.write_str(")")
    }
}

impl<P: Platform, K: Kind> MemoryResource for GpuMemory<P, K> {
    fn allocate(&self, nbytes: usize, stream: &Stream) -> Result<DevicePtr> {
        if nbytes == 0 {
            return Ok(DevicePtr::NULL);
        }
        let host_pool = matches!(self.allocator, Allocator::HostPool(_));
        let ordered = self.stream_ordered() && (!host_pool || self.orders_on(stream));
        if ordered {
            if !host_pool {
                stream.check_device(self.device)?;
            }
            stream.check_usable_here("a stream-ordered allocation")?;
        }
        if (!ordered || host_pool) && stream.is_capturing()? {
            // The driver fails a synchronous allocation during a capture and
            // invalidates the capture, and a graph's allocation nodes hold
            // device memory only: refuse before the call.
            let why = if host_pool {
                "a graph records allocations of device memory only, not of pinned host memory"
            } else {
                "the allocator is not stream-ordered, so the graph cannot record it"
            };
            return Err(Error::StreamCapture {
                device: stream.device(),
                operation: format!("allocating {nbytes} bytes from {self:?}"),
                reason: format!(
                    "{why}; allocate before the capture begins, or from a stream-ordered \
                     device memory resource (whose allocations become graph nodes)"
                ),
            });
        }
        let _active = device::activate(&self.driver, self.device)?;
        let handle = if ordered { stream.handle() } else { 0 };
        // One query per ordered device allocation, with the device already
        // active (a host pool's blocks were refused on a capturing stream
        // above). On the legacy stream: whether a blocking stream's capture
        // binds it, which the driver would invalidate. On any other: the
        // capture it belongs to, whose graph makes the allocation a node of
        // it, remembered so that the capture's own free of it is let through
        // (the graph's temporaries).
        let capture = match (
            ordered && !host_pool,
            result::stream::is_legacy::<P>(handle),
        ) {
            (false, _) => None,
            (true, true) => {
                if result::stream::is_capturing(&self.driver, self.device, handle)? {
                    return Err(Error::StreamCapture {
                        device: stream.device(),
                        operation: format!("allocating {nbytes} bytes from {self:?}"),
                        reason: result::stream::LEGACY_BOUND.into(),
                    });
                }
                None
            }
            (true, false) => result::stream::capture_id(&self.driver, self.device, handle)?,
        };
        let ptr = match result::memory::allocate(&self.driver, self.allocator, nbytes, handle) {
            Ok(ptr) => DevicePtr::from_host_ptr(ptr),
            Err((call, status)) => return Err(self.out_of_memory(nbytes, call, status)),
        };
        if let Some(capture) = capture {
            self.graph_blocks.insert(ptr.addr(), capture);
        }
        if host_pool && !ordered {
            // Allocated on the default stream for a stream this runtime
            // cannot order on (the host's): the block is the host's once
            // that stream reaches the allocation.
            if let Err(e) = result::stream::synchronize(&self.driver, self.device, 0) {
                // SAFETY: allocated just above, used by nothing, freed once.
                let _ = unsafe {
                    result::memory::free(
                        &self.driver,
                        self.allocator,
                        ptr.as_host_ptr(),
                        0,
                        self.device,
                    )
                };
                return Err(e);
            }
        }
        Ok(ptr)
    }

    unsafe fn deallocate(&self, ptr: DevicePtr, nbytes: usize, stream: &Stream) -> Result<()> {
        let null = crate::ledger::check_null(ptr, nbytes).map_err(|kind| Error::Misuse {
            kind,
            ptr,
            nbytes,
            device: self.device,
            resource: format!("{self:?}"),
            test_double: false,
        })?;
        if null || self.driver.owner().is_forked() {
            // In a process forked after the runtime started, the memory is
            // the parent's: it is left to it, with no driver call.
            return Ok(());
        }
        if stream.is_capturing()? {
            let reason = match self.graph_free(ptr, stream)? {
                GraphFree::Own => None,
                // The driver refuses a free node for memory no graph
                // allocated, and invalidates the capture; a synchronous free
                // fails and invalidates it too.
                GraphFree::Outside => Some(
                    "the memory was not allocated by a graph, so a graph cannot free it, and work \
                     queued before the capture may still read it; free it after the capture \
                     ends, or on a stream that is not capturing",
                ),
                // A free node here would free it at every launch of this
                // graph, whether or not its own graph ran before.
                GraphFree::OtherGraph => Some(
                    "the memory is another capture's graph allocation, which devmm frees only \
                     within its own capture or once that graph ran; free it there, or after \
                     the capture ends on a stream that is not capturing",
                ),
                GraphFree::OtherDevice => Some(
                    "the memory is a graph allocation of another device, which devmm lets \
                     its graph free only on a stream of that device; free it on one of that \
                     device's streams in the same capture",
                ),
                GraphFree::Legacy => Some(result::stream::LEGACY_BOUND),
            };
            if let Some(reason) = reason {
                return Err(Error::StreamCapture {
                    device: stream.device(),
                    operation: format!("freeing {nbytes} bytes of {self:?}"),
                    reason: reason.into(),
                });
            }
        }
        let handle = if !self.stream_ordered() {
            0
        } else if !stream.is_usable_here() {
            // Another thread's per-thread stream (a buffer dropped by a
            // garbage collector or a DLPack deleter elsewhere): its handle
            // names this thread's stream here, which is not ordered after
            // the owner's work. Wait for the whole device, then free on
            // its default stream.
            let _active = device::activate(&self.driver, self.device)?;
            result::device::synchronize(&self.driver, self.device)?;
            0
        } else if stream.device() == self.device || self.orders_on(stream) {
            stream.handle()
        } else {
            // A stream of another device (or runtime) means nothing to this
            // device's driver: finish the work queued there, then free on
            // this device's default stream.
            stream.synchronize()?;
            0
        };
        let _active = device::activate(&self.driver, self.device)?;
        let graph = self.graph_blocks.remove(ptr.addr());
        // SAFETY: the caller guarantees `ptr` came from `allocate` on this
        // resource (hence from `self.allocator`) and is freed once.
        let freed = unsafe {
            result::memory::free(
                &self.driver,
                self.allocator,
                ptr.as_host_ptr::<c_void>(),
                handle,
                self.device,
            )
        };
        if let (Err(_), Some(capture)) = (&freed, graph) {
            self.graph_blocks.insert(ptr.addr(), capture);
        }
        freed
    }

    fn device(&self) -> Device {
        self.device
    }

    fn stream_ordered(&self) -> bool {
        matches!(
            self.allocator,
            Allocator::DeviceAsync | Allocator::FromPool(_) | Allocator::HostPool(_)
        )
    }

    /// The driver's allocator: it calls no other resource.
    fn nesting_bound() -> Option<usize> {
        Some(0)
    }

    fn shipped(&self) -> Option<crate::ShippedResource> {
        Some(self.shipped_resource())
    }

    fn guaranteed_alignment(&self) -> usize {
        GPU_ALIGNMENT
    }

    fn dereferenceable(&self) -> bool {
        true
    }

    /// Only `*Malloc` memory has a legacy IPC handle: the driver refuses
    /// pool memory (`*MallocAsync`), pinned and managed memory.
    fn ipc_handle(&self, ptr: DevicePtr, nbytes: usize) -> Option<Result<IpcMemHandle>> {
        (self.allocator == Allocator::Device && self.device.ty() == P::DEVICE)
            .then(|| super::ipc::get_mem_handle(&self.driver, self.device, ptr, nbytes))
    }

    fn managed_memory(&self) -> Option<&dyn ManagedMemory> {
        K::managed(self)
    }

    fn pool_statistics(&self) -> Option<Result<PoolStatistics>> {
        let pool = self.host_pool.as_ref()?;
        Some(result::pool::statistics(
            &pool.driver,
            self.device,
            pool.handle,
        ))
    }

    fn available_memory(&self) -> Result<MemoryInfo> {
        if self.device.ty() == P::HOST {
            return crate::runtime::cpu::host_memory_info();
        }
        let _active = device::activate(&self.driver, self.device)?;
        result::device::memory_info(&self.driver, self.device)
    }
}
