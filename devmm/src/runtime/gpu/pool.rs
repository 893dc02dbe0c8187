//! A stream-ordered resource over a memory pool of its own (`*MemPoolCreate`),
//! written once for both platforms: `devmm::mrs::cuda::CudaAsyncMemoryResource`
//! and `devmm::mrs::rocm::HipAsyncMemoryResource` name it. Its settings (release
//! threshold, maximum size, peer access) are its pool's alone, so no other
//! library in the process sees them, unlike the device's default pool.

use std::fmt;
use std::sync::Arc;

use crate::device::Device;
use crate::error::{Error, Result};
use crate::pool_statistics::PoolStatistics;
use crate::ptr::DevicePtr;
use crate::resource::{MemoryInfo, MemoryResource, resource_chain};
use crate::runtime::DeviceRuntime;
use crate::stream::{Stream, StreamRuntime, StreamSentinel};

use super::memory::{DeviceKind, GPU_ALIGNMENT, GpuMemory};
use super::owned_pool::OwnedPool;
use super::{GpuRuntime, Platform, device, result};

/// How a pool of a resource's own is made: rmm's `cuda_async_memory_resource`
/// settings, plus peer access.
///
/// ```
/// use devmm::mrs::cuda::PoolOptions;
/// let options = PoolOptions {
///     initial_pool_size: Some(64 << 20),
///     release_threshold: Some(256 << 20),
///     ..PoolOptions::default()
/// };
/// assert_eq!(options.max_pool_size, None);
/// assert!(!options.enable_ipc);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolOptions {
    /// Bytes reserved at once, by allocating and freeing them (kept while
    /// the release threshold allows).
    pub initial_pool_size: Option<usize>,
    /// Bytes of unused memory the pool keeps when a stream or the device
    /// synchronizes; `None` keeps up to the device's total memory (as rmm).
    pub release_threshold: Option<u64>,
    /// The most the pool may reserve; past it allocation is out of memory.
    /// `None`: only the device bounds it. Refused on HIP before 6.2, whose
    /// pools ignore the limit.
    pub max_pool_size: Option<usize>,
    /// Whether the pool's memory can be exported to other processes (a
    /// POSIX file descriptor handle).
    pub enable_ipc: bool,
    /// Other devices given read-write access to the pool's memory
    /// (`*MemPoolSetAccess`).
    pub peer_access: Vec<Device>,
}

impl PoolOptions {
    /// Refuses settings that contradict each other, for a pool on `device`
    /// of platform `P`, before any driver is loaded.
    fn check<P: Platform>(&self, device: Device) -> Result<()> {
        let refuse = |reason: String| Err(Error::InvalidArgument { reason });
        if self.max_pool_size == Some(0) {
            return refuse(format!(
                "max_pool_size=0 leaves the pool on {device} no memory; pass None for no limit"
            ));
        }
        if let (Some(initial), Some(max)) = (self.initial_pool_size, self.max_pool_size)
            && initial > max
        {
            return refuse(format!(
                "initial_pool_size={initial} is above max_pool_size={max} for the pool on \
                 {device}; lower the initial size or raise the maximum"
            ));
        }
        for &peer in &self.peer_access {
            if peer == device || peer.ty() != P::DEVICE {
                return refuse(format!(
                    "peer_access names {peer} for a pool on {device}; name other {} devices",
                    P::DEVICE
                ));
            }
        }
        Ok(())
    }
}

/// Stream-ordered device memory from a pool the resource creates
/// (`cudaMemPoolCreate`, `cudaMallocFromPoolAsync`), with the pool's figures
/// ([`pool_statistics`](Self::pool_statistics)), [`trim`](Self::trim) and
/// peer access. Use it through its platform names:
/// `devmm::mrs::cuda::CudaAsyncMemoryResource`,
/// `devmm::mrs::rocm::HipAsyncMemoryResource`.
///
/// ```
/// use devmm::mrs::cuda::{CudaAsyncMemoryResource, PoolOptions};
/// // A host device is refused, whether or not CUDA is here.
/// let refused = CudaAsyncMemoryResource::new(devmm::Device::CPU, PoolOptions::default());
/// assert!(matches!(refused, Err(devmm::Error::InvalidArgument { .. })));
/// ```
pub struct GpuAsyncMemory<P: Platform> {
    // Dropped before the pool: it only names it.
    memory: GpuMemory<P, DeviceKind>,
    pool: OwnedPool<P>,
    options: PoolOptions,
    /// The reserved and used figures at the last reset of the marks, where
    /// the driver's reset makes them 0 ([`Platform::HIGH_WATER_RESET_ZEROES`]):
    /// the marks it reports start from 0 again, and the figures at the
    /// reset are the marks' floor.
    reset_figures: std::sync::Mutex<(u64, u64)>,
}

impl<P: Platform> GpuAsyncMemory<P> {
    /// A pool of its own on `device` from the process-wide runtime.
    pub fn new(device: Device, options: PoolOptions) -> Result<Self> {
        Self::check_kind(device)?;
        options.check::<P>(device)?;
        Self::with_runtime(&*GpuRuntime::<P>::load()?, device, options)
    }

    /// A pool of its own on `device` from `rt`: an
    /// [`Error::InvalidArgument`] where the library has no pool calls or the
    /// device no memory pools, or for contradictory `options`.
    pub fn with_runtime(rt: &GpuRuntime<P>, device: Device, options: PoolOptions) -> Result<Self> {
        Self::check_kind(device)?;
        rt.check(device)?;
        options.check::<P>(device)?;
        for &peer in &options.peer_access {
            rt.check(peer)?;
        }
        let name = P::RESOURCES.pool;
        if !result::pool::supported(rt.driver()) || !rt.pools_supported(device)? {
            return Err(Error::InvalidArgument {
                reason: format!(
                    "{name} needs memory pools, which {device} does not have here (the library \
                     lacks the pool calls, or the device has no memory pools); use {} instead",
                    P::RESOURCES.device
                ),
            });
        }
        if let (Some(max), Some(since)) = (options.max_pool_size, P::MAX_POOL_SIZE_SINCE) {
            let version = result::version::get(rt.driver())?.0;
            if version < since {
                return Err(Error::InvalidArgument {
                    reason: format!(
                        "max_pool_size={max} for {name} on {device} needs {} {} or later, whose \
                         pools honour the limit; this runtime is {} and would let the pool grow \
                         past it: leave max_pool_size unset, or cap the memory with a \
                         LimitingAdaptor",
                        P::API,
                        P::version_text(since),
                        P::version_text(version)
                    ),
                });
            }
        }
        let driver = Arc::clone(rt.driver());
        let _active = device::activate(&driver, device)?;
        let max_size = options.max_pool_size.unwrap_or(0);
        let handle = result::pool::create(&driver, device, max_size, options.enable_ipc)?;
        let pool = OwnedPool::new(driver, device, handle);
        let threshold = match options.release_threshold {
            Some(bytes) => bytes,
            None => u64::try_from(rt.memory_info(device)?.total).unwrap_or(u64::MAX),
        };
        let attr = result::pool::ATTR_RELEASE_THRESHOLD;
        result::pool::set_attribute(&pool.driver, device, handle, attr, threshold)?;
        result::pool::grant_access(&pool.driver, device, handle, &options.peer_access)?;
        let mr = GpuAsyncMemory {
            memory: GpuMemory::from_pool(rt, device, handle)?,
            pool,
            options,
            reset_figures: std::sync::Mutex::new((0, 0)),
        };
        if let Some(initial) = mr.options.initial_pool_size.filter(|&n| n > 0) {
            // Reserved by a block freed at once, which the pool keeps up to
            // its release threshold.
            let stream = rt.stream(device, StreamSentinel::Default)?;
            let ptr = mr.allocate(initial, &stream)?;
            // SAFETY: allocated just above on this resource, freed once,
            // used by nothing.
            unsafe { mr.deallocate(ptr, initial, &stream) }?;
        }
        Ok(mr)
    }

    /// The device a pool is made on when none is named: the platform's first.
    ///
    /// ```
    /// use devmm::mrs::rocm::HipAsyncMemoryResource;
    /// assert_eq!(HipAsyncMemoryResource::default_device().to_string(), "rocm:0");
    /// ```
    pub fn default_device() -> Device {
        Device::new(P::DEVICE, 0)
    }

    fn check_kind(device: Device) -> Result<()> {
        if device.ty() == P::DEVICE {
            return Ok(());
        }
        Err(Error::InvalidArgument {
            reason: format!(
                "{} serves {} devices, not {device}; pass a {} device",
                P::RESOURCES.pool,
                P::DEVICE,
                P::DEVICE
            ),
        })
    }

    /// The options the pool was made with.
    pub fn options(&self) -> &PoolOptions {
        &self.options
    }

    /// The pool's native handle (`cudaMemPool_t`), for libraries that take
    /// one; it stays valid while this resource lives.
    pub fn pool_handle(&self) -> usize {
        self.pool.handle
    }

    /// The pool's reserved and used bytes with their high-water marks, from
    /// the driver. A block's bytes stop counting as used when its free is
    /// reached on its stream; synchronize to see a free's effect.
    pub fn pool_statistics(&self) -> Result<PoolStatistics> {
        let mut figures =
            result::pool::statistics(&self.pool.driver, self.pool.device, self.pool.handle)?;
        if P::HIGH_WATER_RESET_ZEROES {
            let (reserved, used) = *self.reset_figures.lock().unwrap_or_else(|e| e.into_inner());
            figures.reserved_high_bytes = figures.reserved_high_bytes.max(reserved);
            figures.used_high_bytes = figures.used_high_bytes.max(used);
        }
        Ok(figures)
    }

    /// Resets both high-water marks to the current figures.
    ///
    /// Refused with [`Error::InvalidArgument`] for a ROCm pool with a
    /// `max_pool_size`: HIP checks that limit against the reserved
    /// high-water mark, which its reset makes 0, so the pool could then
    /// grow past it.
    pub fn reset_pool_high_water(&self) -> Result<()> {
        if P::HIGH_WATER_RESET_ZEROES && self.options.max_pool_size.is_some() {
            return Err(Error::InvalidArgument {
                reason: format!(
                    "reset_pool_high_water on {self:?}: {}'s pools check max_pool_size against the \
                     reserved high-water mark, which a reset makes 0, so the pool could grow \
                     past its limit; make the pool without max_pool_size to reset its marks",
                    P::RUNTIME
                ),
            });
        }
        let (driver, device, pool) = (&self.pool.driver, self.pool.device, self.pool.handle);
        if !P::HIGH_WATER_RESET_ZEROES {
            return result::pool::reset_high_water(driver, device, pool);
        }
        // The figures around the reset, under one lock: an allocation
        // between the read and the reset is in the second read.
        let mut floor = self.reset_figures.lock().unwrap_or_else(|e| e.into_inner());
        let before = result::pool::statistics(driver, device, pool)?;
        result::pool::reset_high_water(driver, device, pool)?;
        let after = result::pool::statistics(driver, device, pool)?;
        *floor = (
            before.reserved_bytes.max(after.reserved_bytes),
            before.used_bytes.max(after.used_bytes),
        );
        Ok(())
    }

    /// Hands unused memory back to the device until `keep_bytes` stay
    /// reserved (never the memory live blocks use). A block freed on a
    /// stream is unused only once its free is reached there
    /// (`cudaMemPoolTrimTo`): synchronize first to trim it too.
    pub fn trim(&self, keep_bytes: usize) -> Result<()> {
        result::pool::trim(
            &self.pool.driver,
            self.pool.device,
            self.pool.handle,
            keep_bytes,
        )
    }

    /// An out-of-memory error from the pool, with this resource's chain and
    /// the pool's figures, as fields and in the message: how much it holds
    /// unused says whether trimming other pools or waiting for frees could
    /// help.
    fn out_of_memory(&self, error: Error) -> Error {
        let Error::OutOfMemory {
            device,
            nbytes,
            detail,
            ..
        } = error
        else {
            return error;
        };
        let statistics = self.pool_statistics();
        let figures = match &statistics {
            Ok(s) => format!(
                "pool: {} bytes reserved, {} used, {} reserved but unused",
                s.reserved_bytes,
                s.used_bytes,
                s.fragmentation_bytes()
            ),
            Err(e) => format!("pool figures unavailable: {e}"),
        };
        let limit = self
            .options
            .max_pool_size
            .map(|max| format!(", max_pool_size {max}"))
            .unwrap_or_default();
        Error::OutOfMemory {
            device,
            nbytes,
            chain: resource_chain(self),
            detail: Some(match detail {
                Some(driver) => format!("{driver}; {figures}{limit}"),
                None => format!("{figures}{limit}"),
            }),
            pool: statistics.ok(),
        }
    }
}

impl<P: Platform> fmt::Debug for GpuAsyncMemory<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}(device={}, alignment={GPU_ALIGNMENT}",
            P::RESOURCES.pool,
            self.pool.device
        )?;
        if let Some(max) = self.options.max_pool_size {
            write!(f, ", max_pool_size={max}")?;
        }
        if self.options.enable_ipc {
            f.write_str(", ipc=true")?;
        }
        f.write_str(")")
    }
}

impl<P: Platform> MemoryResource for GpuAsyncMemory<P> {
    fn allocate(&self, nbytes: usize, stream: &Stream) -> Result<DevicePtr> {
        self.memory
            .allocate(nbytes, stream)
            .map_err(|e| self.out_of_memory(e))
    }

    unsafe fn deallocate(&self, ptr: DevicePtr, nbytes: usize, stream: &Stream) -> Result<()> {
        // SAFETY: forwarded from the caller: `ptr` came from `allocate` here,
        // which is `self.memory`'s.
        unsafe { self.memory.deallocate(ptr, nbytes, stream) }
    }

    fn device(&self) -> Device {
        self.pool.device
    }

    fn stream_ordered(&self) -> bool {
        true
    }

    /// The driver's allocator: it calls no other resource.
    fn nesting_bound() -> Option<usize> {
        Some(0)
    }

    fn shipped(&self) -> Option<crate::ShippedResource> {
        Some(P::RESOURCES.pool)
    }

    fn guaranteed_alignment(&self) -> usize {
        GPU_ALIGNMENT
    }

    fn dereferenceable(&self) -> bool {
        true
    }

    fn available_memory(&self) -> Result<MemoryInfo> {
        self.memory.available_memory()
    }

    fn pool_statistics(&self) -> Option<Result<PoolStatistics>> {
        Some(GpuAsyncMemory::pool_statistics(self))
    }

    fn ipc_export(
        &self,
        ptr: DevicePtr,
        nbytes: usize,
    ) -> Option<Result<crate::ipc_data::IpcDescriptor>> {
        let pool = &self.pool;
        self.options
            .enable_ipc
            .then(|| super::ipc::export(&pool.driver, pool.device, pool.handle, ptr, nbytes))
    }
}
