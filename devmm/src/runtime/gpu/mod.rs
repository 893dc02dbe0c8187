//! What the CUDA and ROCm runtimes share: HIP mirrors the CUDA runtime call
//! for call, so the runtime logic is written once over [`Platform`], and
//! each backend folder (`cuda/`, `rocm/`) supplies its table, its constants
//! and its stream rules.
//!
//! Layers, as in cudarc: the generated table (raw `extern "C"` pointers),
//! [`result`] (status codes to [`Error`](crate::Error), grouped by noun),
//! then the safe types here and in `memory`.

pub(crate) mod calls;
pub(crate) mod device;
mod graph_blocks;
mod ipc;
mod managed;
pub(crate) mod memory;
mod owned_pool;
pub(crate) mod pool;
#[cfg(all(test, not(miri)))]
mod real_headers;
pub(crate) mod result;
pub(crate) mod stream;

use std::collections::HashMap;
use std::ffi::{OsStr, c_int, c_void};
use std::fmt;
use std::sync::{Arc, Mutex, Weak};

use crate::device::{Device, DeviceType};
use crate::error::{Error, Result};
use crate::ptr::DevicePtr;
use crate::resource::{MemoryInfo, MemoryResource};
use crate::shipped::ShippedResource;
use crate::stream::{Stream, StreamRuntime, StreamSentinel};

use super::driver::{Driver, DriverTable};
use super::{ActivationGuard, DeviceRuntime};
use crate::copy_kind::CopyKind;
pub(crate) use calls::Calls;

/// A driver status code (`cudaError_t`, `hipError_t`); 0 is success.
pub(crate) type Status = c_int;
/// A native stream or event handle.
pub(crate) type Handle = *mut c_void;

/// A platform's resources: what each reports as
/// [`MemoryResource::shipped`](crate::MemoryResource::shipped), and so its
/// name in `Debug` and resource chains.
#[derive(Clone, Copy, Debug)]
pub struct PlatformResources {
    pub(crate) device: ShippedResource,
    pub(crate) pinned: ShippedResource,
    pub(crate) managed: ShippedResource,
    /// The resource over a pool of its own.
    pub(crate) pool: ShippedResource,
}

/// The value in `slot`, or the one `load` makes, which is kept unless
/// another thread stored one first. `load` runs outside the lock: a first
/// load can take seconds (the first `cudaGetDeviceCount` on a many-GPU
/// node), and a thread that forks meanwhile would leave its child a lock
/// that no thread there will release, so the child's first use would hang
/// rather than be refused.
fn shared_or_load<T>(
    slot: &Mutex<Option<Arc<T>>>,
    load: impl FnOnce() -> Result<Arc<T>>,
) -> Result<Arc<T>> {
    let lock = || slot.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(shared) = lock().as_ref() {
        return Ok(Arc::clone(shared));
    }
    let loaded = load()?;
    Ok(Arc::clone(lock().get_or_insert(loaded)))
}

/// One GPU platform: its generated table plus the constants and rules that
/// differ between CUDA and ROCm. Implemented in `cuda/` and `rocm/` only.
pub trait Platform: DriverTable<Roles = Calls> + fmt::Debug {
    /// The devmm runtime name (`cuda`).
    const RUNTIME: &'static str;
    /// Device memory.
    const DEVICE: DeviceType;
    /// Pinned host memory.
    const HOST: DeviceType;
    /// Managed memory (ROCm has no DLPack type of its own for it: `Rocm`).
    const MANAGED: DeviceType;
    /// The device types the runtime serves, primary first.
    const DEVICE_TYPES: &'static [DeviceType];
    /// `cudaErrorMemoryAllocation` / `hipErrorOutOfMemory`.
    const ERROR_OUT_OF_MEMORY: Status;
    /// `cudaErrorNoDevice` / `hipErrorNoDevice`: no device here, so the
    /// runtime is unavailable.
    const ERROR_NO_DEVICE: Status;
    /// What the device count answers when the library has no driver, or
    /// one older than itself: the runtime is unavailable.
    const ERROR_INSUFFICIENT_DRIVER: Status;
    /// What the device count answers when the driver could not be
    /// initialised, as in a child forked after the parent started the
    /// driver: the runtime is unavailable.
    const ERROR_NOT_INITIALIZED: Status;
    /// The device attribute saying whether memory pools (`*MallocAsync`) work.
    const ATTR_MEMORY_POOLS_SUPPORTED: c_int;
    /// The device attribute saying whether the host may touch managed
    /// memory while work runs on the device (`cudaDevAttrConcurrentManagedAccess`
    /// 89, `hipDeviceAttributeConcurrentManagedAccess` 9).
    const ATTR_CONCURRENT_MANAGED_ACCESS: c_int;
    /// The device attribute saying whether host and device share one
    /// address space, which the inferred copy direction needs.
    const ATTR_UNIFIED_ADDRESSING: c_int;
    /// The compute capability attributes (major, minor), where the platform has them.
    const ATTR_COMPUTE_CAPABILITY: Option<(c_int, c_int)>;
    /// The platform's resources.
    const RESOURCES: PlatformResources;
    /// The first runtime version (as `*RuntimeGetVersion` encodes it) whose
    /// prefetch and advice take a location struct instead of an ordinal
    /// (CUDA 13); `None` where every version takes the ordinal.
    const MEM_LOCATION_SINCE: Option<i32>;
    /// The first runtime versions whose memory pools may hold pinned host
    /// memory: on a host NUMA node (CUDA 12.2), then on the host as a whole
    /// (CUDA 13.0); `None` where no version has such pools.
    const HOST_POOLS_SINCE: Option<(i32, i32)>;
    /// The device attributes that say whether a device takes pools on a
    /// host NUMA node and on the host (`cudaDevAttrHostNumaMemoryPoolsSupported`
    /// 142, `cudaDevAttrHostMemoryPoolsSupported` 144); `None` where no
    /// version has such pools.
    const ATTR_HOST_POOLS_SUPPORTED: Option<(c_int, c_int)>;
    /// The device attribute naming the host NUMA node closest to a device
    /// (`cudaDevAttrHostNumaId` 134, -1 without NUMA); `None` where the
    /// platform has none.
    const ATTR_HOST_NUMA_ID: Option<c_int>;
    /// The first runtime version whose pools honour `maxSize` in the pool
    /// properties (HIP 6.2: before it the bytes are reserved, and a pool
    /// grows past the limit); `None` where devmm knows of no version that
    /// ignores it.
    const MAX_POOL_SIZE_SINCE: Option<i32>;
    /// Whether writing 0 to a pool's high-water mark makes it 0 rather
    /// than the current figure, with `maxSize` checked against the reserved
    /// mark rather than the reserve (HIP: clr's `MemoryPool::SetAttribute`
    /// and `AllocateMemory`): a reset there would let a bounded pool grow
    /// past its limit.
    const HIGH_WATER_RESET_ZEROES: bool;
    /// Whether `*MemPoolExportToShareableHandle` hands out the pool's own
    /// file descriptor, the same on every call and closed with the pool
    /// (HIP's), rather than a new one the caller owns (CUDA's).
    const EXPORT_KEEPS_HANDLE: bool;
    /// Where the library is installed besides the loader's search path.
    const SEARCH: super::discovery::SearchPath<'static>;

    /// A version as the platform writes it (CUDA `13000` is `13.0`).
    fn version_text(encoded: i32) -> String;

    /// The kernel driver's version and its encoded form, where a kernel
    /// driver answered, given what the library's `*DriverGetVersion` said.
    fn kernel_driver_version(library_answer: i32) -> Option<(String, Option<i32>)>;

    /// Whether the device `ordinal` has an active primary context, where
    /// the library can tell (`cuDevicePrimaryCtxGetState`): making a device
    /// without one current creates it, which the activation guard avoids.
    fn has_primary_context(&self, ordinal: c_int) -> Option<bool>;

    /// Allocates pinned host memory (`cudaMallocHost`, `hipHostMalloc`: the
    /// one call whose signature differs), returning the call's name, its
    /// status and the pointer.
    fn host_malloc(&self, nbytes: usize) -> (&'static str, Status, *mut c_void);

    /// The native handle of a built-in stream.
    fn sentinel_handle(which: StreamSentinel) -> usize;

    /// The consumer stream handle a DLPack `stream=` value names:
    /// `Ok(None)` for no synchronization, `Err(reason)` for values the
    /// protocol forbids on this platform.
    fn consumer_handle(value: Option<i64>) -> std::result::Result<Option<usize>, String>;

    /// The process-wide instance loaded by the registry and by the
    /// resources' `new` constructors.
    fn shared_slot() -> &'static Mutex<Option<Arc<GpuRuntime<Self>>>>;
}

/// A GPU runtime over a loaded driver table: `CudaRuntime` and
/// `RocmRuntime` are this type for their platforms.
///
/// ```
/// use devmm::runtime::cuda::CudaRuntime;
/// use devmm::DeviceRuntime;
/// match CudaRuntime::load() {
///     Ok(rt) => assert!(rt.device_count().is_ok()),
///     // Without the CUDA runtime, the error names the libraries tried.
///     Err(devmm::Error::RuntimeUnavailable { name, reason }) => {
///         assert_eq!(name, "cuda");
///         assert!(reason.contains("libcudart") || reason.contains("DEVMM_CUDART_PATH"));
///     }
///     Err(other) => return Err(other),
/// }
/// # Ok::<(), devmm::Error>(())
/// ```
pub struct GpuRuntime<P: Platform> {
    /// This runtime, for the streams it makes: each carries it, so copies,
    /// exports and hand-offs on a stream ask the stream's own runtime.
    me: Weak<GpuRuntime<P>>,
    driver: Arc<Driver<P>>,
    /// Read once, at load: devices do not come and go under a process.
    device_count: usize,
    /// Every library discovery tried, with its outcome (empty when the
    /// library was named).
    discovery: Vec<String>,
    defaults: Mutex<HashMap<Device, Arc<dyn MemoryResource>>>,
    /// One event per device, recorded again for every hand-off.
    events: Mutex<HashMap<Device, usize>>,
    /// Which ordinals have unified addressing, once asked.
    unified: Mutex<HashMap<c_int, bool>>,
}

impl<P: Platform> GpuRuntime<P> {
    /// Queues one memcpy of `kind` on `stream`, with its device active.
    /// [`CopyKind::Default`] needs unified addressing on the device.
    ///
    /// # Safety
    ///
    /// `dst` and `src` must be valid for `nbytes` on the sides `kind` names,
    /// and must not overlap.
    unsafe fn copy(
        &self,
        dst: *mut c_void,
        src: *const c_void,
        nbytes: usize,
        kind: CopyKind,
        stream: &Stream,
    ) -> Result<()> {
        let device = stream.device();
        self.check(device)?;
        stream.check_usable_here("a copy")?;
        let _active = device::activate(&self.driver, device)?;
        let legacy = result::stream::is_legacy::<P>(stream.handle());
        if (kind != CopyKind::DeviceToDevice || legacy)
            && nbytes > 0
            && result::stream::is_capturing(&self.driver, device, stream.handle())?
        {
            let (operation, reason) = if legacy {
                (
                    format!("a {nbytes}-byte copy"),
                    result::stream::LEGACY_BOUND,
                )
            } else {
                (
                    format!("a {nbytes}-byte copy touching host memory"),
                    "the graph would read or write host memory devmm only vouches for during \
                     this call, at every launch; copy before the capture begins or after it \
                     ends, or on a stream that is not capturing",
                )
            };
            return Err(Error::StreamCapture {
                device,
                operation,
                reason: reason.into(),
            });
        }
        if kind == CopyKind::Default && nbytes > 0 && !self.unified_addressing(device)? {
            return Err(Error::InvalidArgument {
                reason: format!(
                    "{device} has no unified addressing, so the driver cannot tell host from \
                     device memory; name the copy's direction instead of DEFAULT"
                ),
            });
        }
        // SAFETY: forwarded from the caller's guarantee.
        unsafe {
            result::memory::copy_async(
                &self.driver,
                device,
                dst,
                src,
                nbytes,
                kind,
                stream.handle(),
            )
        }
    }

    /// The process-wide runtime, loading the driver on first use (the
    /// path in the platform's environment override, or else the first of
    /// its libraries that can run a device here: one that loads but cannot
    /// is passed over, and [`library_discovery`](DeviceRuntime::library_discovery)
    /// says so).
    pub fn load() -> Result<Arc<GpuRuntime<P>>> {
        shared_or_load(P::shared_slot(), || {
            let (driver, device_count, discovery) =
                Driver::open_runnable(P::RUNTIME, &P::SEARCH, Self::runnable_devices)?;
            Ok(GpuRuntime::new(driver, device_count, discovery))
        })
    }

    /// A runtime over the library at `path`, independent of the
    /// process-wide one (for a specific driver build, or a test double).
    ///
    /// ```
    /// use devmm::runtime::rocm::RocmRuntime;
    /// let err = RocmRuntime::open("/nonexistent/libamdhip64.so").unwrap_err();
    /// assert!(err.to_string().contains("cannot load /nonexistent/libamdhip64.so"));
    /// ```
    pub fn open(path: impl AsRef<OsStr>) -> Result<Arc<GpuRuntime<P>>> {
        let (driver, device_count) = Driver::open_path(P::RUNTIME, path.as_ref())?
            .check_runnable(P::RUNTIME, Self::runnable_devices)?;
        Ok(GpuRuntime::new(driver, device_count, Vec::new()))
    }

    /// A runtime over a driver that found `device_count` devices.
    fn new(driver: Driver<P>, device_count: usize, discovery: Vec<String>) -> Arc<GpuRuntime<P>> {
        let driver = Arc::new(driver);
        Arc::new_cyclic(|me| GpuRuntime {
            me: Weak::clone(me),
            driver,
            device_count,
            discovery,
            defaults: Mutex::default(),
            events: Mutex::default(),
            unified: Mutex::default(),
        })
    }

    /// The devices of a loaded library, or why it cannot run one here: no
    /// driver behind it (a container with the CUDA runtime but no GPU
    /// driver, a CUDA 13 runtime over a CUDA 12 driver), or no device (HIP
    /// without an AMD kernel driver answers no-device). One rule for every
    /// runtime: a runtime without a device to run is unavailable, so
    /// `available_runtimes()` and `devmm info` agree on it.
    fn runnable_devices(driver: &Driver<P>) -> std::result::Result<usize, String> {
        match result::device::count(driver) {
            Ok(0) => Err(
                "it reports no device; check that a GPU and its kernel driver \
                 are present, or use another runtime"
                    .into(),
            ),
            Ok(count) => Ok(count),
            Err(Error::Driver { source, .. }) if source.code == P::ERROR_NO_DEVICE => Err(format!(
                "it finds no device here: {source}; check that a GPU and its kernel driver \
                     are present, or use another runtime"
            )),
            Err(Error::Driver { source, .. }) if source.code == P::ERROR_INSUFFICIENT_DRIVER => {
                Err(format!(
                    "there is no usable driver behind it: {source}; install or update the GPU \
                     driver, or use another runtime"
                ))
            }
            // The driver's state is the parent's in a forked child, which
            // another library (PyTorch, CuPy) may have started before devmm
            // was ever used there: no driver update helps then.
            Err(Error::Driver { source, .. }) if source.code == P::ERROR_NOT_INITIALIZED => {
                Err(format!(
                    "its driver could not be initialised: {source}; in a process forked after \
                     the parent started the GPU runtime (multiprocessing's `fork` start method, \
                     a DataLoader worker) it never can be: start the process with the `spawn` \
                     start method; otherwise check the GPU driver installation"
                ))
            }
            Err(other) => Err(format!("it cannot count its devices: {other}")),
        }
    }

    /// Whether the driver library can be opened (no table is resolved);
    /// what `runtime_names()` asks.
    ///
    /// ```
    /// let present = devmm::runtime::cuda::CudaRuntime::probe();
    /// # if std::env::var("DEVMM_RUNTIME").is_err() {
    /// assert_eq!(present, devmm::runtime_names().iter().any(|n| n == "cuda"));
    /// # }
    /// ```
    pub fn probe() -> bool {
        Driver::<P>::probe(&P::SEARCH)
    }

    /// The path or file name the driver library was loaded from.
    ///
    /// ```no_run
    /// let rt = devmm::runtime::cuda::CudaRuntime::load()?;
    /// let (runtime, driver) = rt.versions()?;
    /// println!("{:?}: runtime {runtime}, driver {driver}, cudaMallocAsync: {}",
    ///          rt.library_path(), rt.has_stream_ordered_allocation());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn library_path(&self) -> &OsStr {
        self.driver.path()
    }

    /// The runtime and driver versions, as the library encodes them
    /// (CUDA: `1000 * major + 10 * minor`).
    pub fn versions(&self) -> Result<(i32, i32)> {
        result::version::get(&self.driver)
    }

    /// Whether the driver has stream-ordered allocation
    /// (`cudaMallocAsync` / `hipMallocAsync`).
    pub fn has_stream_ordered_allocation(&self) -> bool {
        let calls = self.driver.roles();
        calls.malloc_async.is_some() && calls.free_async.is_some()
    }

    pub(crate) fn driver(&self) -> &Arc<Driver<P>> {
        &self.driver
    }

    /// This runtime as the operations its streams carry.
    pub(crate) fn stream_ops(&self) -> Result<Arc<dyn crate::stream::StreamOps>> {
        // `me` upgrades whenever `&self` is reachable through the `Arc` every
        // constructor returns; only a call from inside the last drop fails.
        match self.me.upgrade() {
            Some(me) => Ok(me),
            None => Err(Error::RuntimeUnavailable {
                name: P::RUNTIME.into(),
                reason: "the runtime is being dropped; load it again".into(),
            }),
        }
    }

    /// Checks that the runtime serves `device`, that it exists, and that
    /// this process is the one the runtime started in.
    pub(crate) fn check(&self, device: Device) -> Result<()> {
        device::check::<P>(self.device_count, device)?;
        self.driver.owner().check(P::RUNTIME, device)
    }

    /// A stream over a handle the caller keeps alive; the per-thread
    /// default stream's handle becomes the calling thread's.
    fn stream_over(&self, device: Device, handle: usize) -> Result<Stream> {
        let ops = self.stream_ops()?;
        let per_thread = P::sentinel_handle(StreamSentinel::PerThreadDefault);
        if handle == per_thread && per_thread != P::sentinel_handle(StreamSentinel::Default) {
            Ok(Stream::per_thread(device, handle, ops))
        } else {
            Ok(Stream::borrowed(device, handle, ops))
        }
    }

    /// Whether `device`'s ordinal shares one address space with the host,
    /// asked of the driver once per ordinal.
    fn unified_addressing(&self, device: Device) -> Result<bool> {
        let ordinal = device::ordinal(device);
        let mut known = self.unified.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&unified) = known.get(&ordinal) {
            return Ok(unified);
        }
        let attribute = P::ATTR_UNIFIED_ADDRESSING;
        let unified = result::device::attribute(&self.driver, attribute, device)? != 0;
        known.insert(ordinal, unified);
        Ok(unified)
    }

    /// Whether `device` supports memory pools, which `*MallocAsync` needs.
    pub(crate) fn pools_supported(&self, device: Device) -> Result<bool> {
        self.check(device)?;
        let attribute =
            result::device::attribute(&self.driver, P::ATTR_MEMORY_POOLS_SUPPORTED, device)?;
        Ok(attribute != 0)
    }

    /// Makes `consumer` wait for `producer` through the device's reused
    /// event; a driver failure on the way is an [`Error::Handoff`].
    fn wait_through_event(&self, device: Device, consumer: usize, producer: usize) -> Result<()> {
        self.record_and_wait(device, consumer, producer)
            .map_err(|source| Error::Handoff {
                device,
                source: Box::new(source),
            })
    }

    /// [`wait_through_event`](Self::wait_through_event)'s driver calls.
    fn record_and_wait(&self, device: Device, consumer: usize, producer: usize) -> Result<()> {
        let _active = device::activate(&self.driver, device)?;
        let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        let event = match events.get(&device) {
            Some(&event) => event,
            None => {
                let event = result::stream::create_event(&self.driver, device)?;
                events.insert(device, event);
                event
            }
        };
        result::stream::wait(&self.driver, device, consumer, producer, event)
    }
}

impl<P: Platform> Drop for GpuRuntime<P> {
    /// Destroys the hand-off events (the process-wide runtimes never drop;
    /// the ones `open` makes do).
    fn drop(&mut self) {
        let events = std::mem::take(self.events.get_mut().unwrap_or_else(|e| e.into_inner()));
        for (device, event) in events {
            let destroyed = device::activate(&self.driver, device)
                .and_then(|_active| result::stream::destroy_event(&self.driver, device, event));
            if let Err(e) = destroyed {
                tracing::warn!(target: "devmm::runtime", error = %e, "could not destroy a hand-off event");
            }
        }
    }
}

impl<P: Platform> fmt::Debug for GpuRuntime<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuRuntime")
            .field("runtime", &P::RUNTIME)
            .field("library", &self.driver.path())
            .finish_non_exhaustive()
    }
}

impl<P: Platform> StreamRuntime for GpuRuntime<P> {
    fn name(&self) -> &str {
        P::RUNTIME
    }

    fn device_types(&self) -> &[DeviceType] {
        P::DEVICE_TYPES
    }

    fn stream(&self, device: Device, which: StreamSentinel) -> Result<Stream> {
        self.check(device)?;
        self.stream_over(device, P::sentinel_handle(which))
    }

    fn create_stream(&self, device: Device) -> Result<Stream> {
        self.create_stream_with_flags(device, crate::stream::StreamFlags::SyncDefault)
    }

    fn create_stream_with_flags(
        &self,
        device: Device,
        flags: crate::stream::StreamFlags,
    ) -> Result<Stream> {
        self.check(device)?;
        let _active = device::activate(&self.driver, device)?;
        let ops = self.stream_ops()?;
        let handle = result::stream::create(&self.driver, device, flags as u32)?;
        Ok(Stream::owned(device, handle, ops))
    }

    fn wrap_stream(&self, device: Device, handle: usize) -> Result<Stream> {
        self.check(device)?;
        self.stream_over(device, handle)
    }

    fn consumer_stream(&self, device: Device, value: Option<i64>) -> Result<Option<Stream>> {
        self.check(device)?;
        match P::consumer_handle(value) {
            Ok(None) => Ok(None),
            Ok(Some(handle)) => Ok(Some(self.stream_over(device, handle)?)),
            Err(reason) => Err(Error::Stream { device, reason }),
        }
    }

    unsafe fn copy_host_to_device(
        &self,
        dst: DevicePtr,
        src: &[u8],
        stream: &Stream,
    ) -> Result<()> {
        let (to, from) = (dst.as_host_ptr(), src.as_ptr().cast());
        let kind = result::memory::kind_for_device::<P>(stream.device(), CopyKind::HostToDevice);
        // SAFETY: the caller guarantees `dst` is valid for `src.len()` bytes.
        unsafe { self.copy(to, from, src.len(), kind, stream) }?;
        // `src` is only borrowed for this call: wait until the copy has read it.
        crate::stream::StreamOps::synchronize(self, stream.device(), stream.handle())
    }

    unsafe fn copy_device_to_host(
        &self,
        dst: &mut [u8],
        src: DevicePtr,
        stream: &Stream,
    ) -> Result<()> {
        let (to, from) = (
            dst.as_mut_ptr().cast(),
            src.as_host_ptr::<c_void>().cast_const(),
        );
        let kind = result::memory::kind_for_device::<P>(stream.device(), CopyKind::DeviceToHost);
        // SAFETY: the caller guarantees `src` is valid for `dst.len()` bytes;
        // `dst` is an exclusive borrow.
        unsafe { self.copy(to, from, dst.len(), kind, stream) }?;
        // The caller reads `dst` as soon as this returns.
        crate::stream::StreamOps::synchronize(self, stream.device(), stream.handle())
    }

    unsafe fn copy_device_to_device(
        &self,
        dst: DevicePtr,
        src: DevicePtr,
        nbytes: usize,
        stream: &Stream,
    ) -> Result<()> {
        let (to, from) = (dst.as_host_ptr(), src.as_host_ptr::<c_void>().cast_const());
        let kind = result::memory::kind_for_device::<P>(stream.device(), CopyKind::DeviceToDevice);
        // SAFETY: the caller guarantees both ranges are valid and disjoint.
        unsafe { self.copy(to, from, nbytes, kind, stream) }
    }

    /// The kind goes to the driver as it is (`Default` where the device has
    /// unified addressing); a copy touching host memory is synchronized
    /// before this returns, one between device addresses stays ordered on
    /// `stream`.
    unsafe fn memcpy(
        &self,
        dst: DevicePtr,
        src: DevicePtr,
        nbytes: usize,
        kind: CopyKind,
        stream: &Stream,
    ) -> Result<()> {
        crate::copy_kind::check_addresses(dst, src, nbytes)?;
        self.check(stream.device())?;
        if nbytes == 0 {
            return Ok(());
        }
        let overlap = dst.addr() < src.addr().saturating_add(nbytes)
            && src.addr() < dst.addr().saturating_add(nbytes);
        if kind == CopyKind::HostToHost && overlap {
            // The driver's copies may not overlap and the trait's
            // host-to-host copy may (memmove): after the stream's queued
            // work, on the host. Disjoint ranges go to the driver, which
            // refuses device memory named as host memory. Through the stream:
            // another thread's per-thread stream is waited for by the device.
            stream.synchronize()?;
            // SAFETY: the caller guarantees both host ranges.
            unsafe { crate::copy_kind::host_to_host(dst, src, nbytes) };
            return Ok(());
        }
        let (to, from) = (dst.as_host_ptr(), src.as_host_ptr::<c_void>().cast_const());
        // SAFETY: the caller guarantees both ranges for `kind`.
        unsafe { self.copy(to, from, nbytes, kind, stream) }?;
        if kind == CopyKind::DeviceToDevice {
            Ok(())
        } else {
            // The host side is only vouched for during this call.
            crate::stream::StreamOps::synchronize(self, stream.device(), stream.handle())
        }
    }
}

impl<P: Platform> DeviceRuntime for GpuRuntime<P> {
    fn device_count(&self) -> Result<usize> {
        Ok(self.device_count)
    }

    fn memory_info(&self, device: Device) -> Result<MemoryInfo> {
        self.check(device)?;
        if device.ty() == P::HOST {
            return super::cpu::host_memory_info();
        }
        let _active = device::activate(&self.driver, device)?;
        result::device::memory_info(&self.driver, device)
    }

    fn activate(&self, device: Device) -> Result<ActivationGuard> {
        self.check(device)?;
        device::activate(&self.driver, device)
    }

    fn default_resource(&self, device: Device) -> Result<Arc<dyn MemoryResource>> {
        self.check(device)?;
        let mut defaults = self.defaults.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(mr) = defaults.get(&device) {
            return Ok(Arc::clone(mr));
        }
        let mr: Arc<dyn MemoryResource> = if device.ty() == P::DEVICE {
            Arc::new(memory::GpuMemory::<P, memory::DeviceKind>::with_runtime(
                self, device,
            )?)
        } else if device.ty() == P::HOST {
            Arc::new(memory::GpuMemory::<P, memory::PinnedKind>::with_runtime(
                self, device,
            )?)
        } else {
            Arc::new(memory::GpuMemory::<P, memory::ManagedKind>::with_runtime(
                self, device,
            )?)
        };
        defaults.insert(device, Arc::clone(&mr));
        Ok(mr)
    }

    fn describe(&self, device: Device) -> Result<super::DeviceDescription> {
        self.check(device)?;
        if device.ty() != P::DEVICE {
            // Pinned and managed memory are not one device's to describe.
            return Ok(super::DeviceDescription::default());
        }
        let capability = match P::ATTR_COMPUTE_CAPABILITY {
            Some((major, minor)) => Some((
                result::device::attribute(&self.driver, major, device)?,
                result::device::attribute(&self.driver, minor, device)?,
            )),
            None => None,
        };
        Ok(super::DeviceDescription {
            name: result::device::name(&self.driver, device)?,
            compute_capability: capability,
            pci_bus_id: Some(result::device::pci_bus_id(&self.driver, device)?),
            memory_pools: Some(self.pools_supported(device)?),
        })
    }

    fn library_file(&self) -> Option<String> {
        Some(self.library_path().to_string_lossy().into_owned())
    }

    fn library_discovery(&self) -> &[String] {
        &self.discovery
    }

    fn library_versions(&self) -> Result<Option<super::LibraryVersions>> {
        let (runtime, driver) = self.versions()?;
        let (driver, driver_code) = match P::kernel_driver_version(driver) {
            Some((text, code)) => (Some(text), code),
            None => (None, None),
        };
        Ok(Some(super::LibraryVersions::new(
            P::version_text(runtime),
            runtime,
            driver,
            driver_code,
        )))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::shared_or_load;

    #[test]
    fn a_shared_value_is_loaded_outside_its_lock_and_the_first_stored_is_kept() {
        let slot = Mutex::new(None);
        let first = shared_or_load(&slot, || {
            assert!(slot.try_lock().is_ok(), "the lock is held while loading");
            Ok(Arc::new(1))
        })
        .unwrap();
        let again = shared_or_load(&slot, || panic!("loaded twice")).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        // A load that loses the race to another thread's store gets the
        // stored value.
        let slot = Mutex::new(None);
        let raced = shared_or_load(&slot, || {
            *slot.lock().unwrap() = Some(Arc::new(2));
            Ok(Arc::new(3))
        })
        .unwrap();
        assert_eq!(*raced, 2);
    }
}
