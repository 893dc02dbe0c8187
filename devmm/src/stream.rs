//! Streams: opaque native handles plus the ordering operations devmm needs.
//!
//! devmm never launches work. A stream is only something to allocate on,
//! free on, synchronize, and make wait on another stream; each runtime
//! supplies those operations through [`StreamOps`]. A stream carries its
//! runtime's operations table, [`StreamRuntime`], so copies, DLPack exports
//! and hand-offs ask the stream, never a global lookup. The table is
//! defined here, below the runtimes: a stream names no runtime type.

use std::any::Any;
use std::fmt;
use std::sync::{Arc, OnceLock};
use std::thread::ThreadId;

use crate::copy_kind::CopyKind;
use crate::device::{Device, DeviceType};
use crate::error::{Error, Result};
use crate::ptr::DevicePtr;

/// The platform-independent names for a runtime's built-in streams.
///
/// They are distinct values: each runtime maps them to its own magic
/// handles (CUDA: legacy default `1`, per-thread default `2`; ROCm and the
/// CPU: `0`).
///
/// ```
/// assert_ne!(devmm::DEFAULT, devmm::LEGACY_DEFAULT);
/// assert_ne!(devmm::LEGACY_DEFAULT, devmm::PER_THREAD_DEFAULT);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamSentinel {
    /// The runtime's default stream.
    Default,
    /// The legacy (implicitly synchronizing) default stream.
    LegacyDefault,
    /// The per-thread default stream.
    PerThreadDefault,
}

impl StreamSentinel {
    /// The sentinel's constant name (`DEFAULT`, `LEGACY_DEFAULT`,
    /// `PER_THREAD_DEFAULT`), which the Python module exports it as too.
    ///
    /// ```
    /// assert_eq!(devmm::PER_THREAD_DEFAULT.name(), "PER_THREAD_DEFAULT");
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            StreamSentinel::Default => "DEFAULT",
            StreamSentinel::LegacyDefault => "LEGACY_DEFAULT",
            StreamSentinel::PerThreadDefault => "PER_THREAD_DEFAULT",
        }
    }
}

/// The runtime's default stream.
pub const DEFAULT: StreamSentinel = StreamSentinel::Default;
/// The legacy default stream.
pub const LEGACY_DEFAULT: StreamSentinel = StreamSentinel::LegacyDefault;
/// The per-thread default stream.
pub const PER_THREAD_DEFAULT: StreamSentinel = StreamSentinel::PerThreadDefault;

/// How a created stream orders against the legacy default stream, spelled
/// as rmm's `CudaStreamFlags`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum StreamFlags {
    /// Synchronizes with the legacy default stream (`cudaStreamDefault`).
    #[default]
    SyncDefault = 0,
    /// Does not synchronize with the legacy default stream (`cudaStreamNonBlocking`).
    NonBlocking = 1,
}

impl TryFrom<i64> for StreamFlags {
    type Error = Error;

    /// The flags of their code (`cudaStreamDefault` 0, `cudaStreamNonBlocking`
    /// 1); any other value is an [`Error::InvalidArgument`].
    ///
    /// ```
    /// use devmm::StreamFlags;
    /// assert_eq!(StreamFlags::try_from(1)?, StreamFlags::NonBlocking);
    /// assert!(StreamFlags::try_from(2).is_err());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    fn try_from(code: i64) -> Result<StreamFlags> {
        match code {
            0 => Ok(StreamFlags::SyncDefault),
            1 => Ok(StreamFlags::NonBlocking),
            other => Err(Error::InvalidArgument {
                reason: format!(
                    "stream flags must be 0 (synchronize with the default stream) or 1 \
                     (non-blocking), not {other}"
                ),
            }),
        }
    }
}

/// The ordering operations a runtime provides for its streams.
///
/// Implemented by each runtime (usually by the runtime type itself); users
/// meet it only when registering a runtime of their own.
pub trait StreamOps: Send + Sync + fmt::Debug {
    /// Blocks until all work queued on `handle` has finished.
    fn synchronize(&self, device: Device, handle: usize) -> Result<()>;

    /// Makes future work on `consumer` wait for the work queued so far on
    /// `producer` (through an event on platforms that have them).
    fn wait(&self, device: Device, consumer: usize, producer: usize) -> Result<()>;

    /// Blocks until all work queued on every stream of `device` has
    /// finished: how work on another thread's per-thread default stream is
    /// waited for, since its handle names the calling thread's own stream
    /// here. A runtime without device-wide synchronization refuses (the
    /// default).
    fn synchronize_device(&self, device: Device) -> Result<()> {
        Err(Error::Stream {
            device,
            reason: "this runtime cannot synchronize a whole device, which waiting for another \
                     thread's per-thread default stream (PER_THREAD_DEFAULT) needs; order the \
                     work on the thread that owns the stream, or use a created stream"
                .into(),
        })
    }

    /// Whether the stream `handle` is capturing a graph (CUDA graphs, HIP
    /// graphs); runtimes without graphs answer `false` (the default).
    fn is_capturing(&self, _device: Device, _handle: usize) -> Result<bool> {
        Ok(false)
    }

    /// Destroys a stream the runtime created; called once, when the last
    /// clone of an owning [`Stream`] drops.
    fn destroy(&self, device: Device, handle: usize);

    /// The operations table of the runtime these streams belong to (the
    /// runtime itself, upcast): what [`Stream::runtime`] answers, and what
    /// copies and DLPack exports on the stream call.
    /// Asked the first time it is needed; the stream keeps the first
    /// answer that is a runtime for its life, and asks again after an
    /// error (a binding's stream whose platform is loaded later, say), so
    /// a stream needs a runtime only for what only a runtime can do.
    fn runtime(self: Arc<Self>) -> Result<Arc<dyn StreamRuntime>>;

    /// The object these operations stand for, if a binding made them for
    /// one (a stream defined in Python), so that a stream handed back to
    /// that binding (by a recording resource's log, to a callback) is that
    /// very object: what [`Stream::origin`] answers. Runtimes' streams
    /// have none.
    fn origin(&self) -> Option<&(dyn Any + Send + Sync)> {
        None
    }
}

/// What a stream needs of the runtime it belongs to: its name and device
/// types, its built-in, created and wrapped streams, the DLPack consumer
/// streams, and the copies ordered on its streams. The table a stream
/// holds ([`Stream::runtime`], [`StreamOps::runtime`]), defined here,
/// below every runtime, so a stream is a plain value that names no runtime
/// type; [`DeviceRuntime`](crate::DeviceRuntime) extends it with devices,
/// memory and resources, and the whole runtime of a device is
/// [`runtime_for`](crate::runtime_for)'s.
///
/// ```
/// use devmm::{Device, Stream, StreamRuntime};
/// let ops: std::sync::Arc<dyn StreamRuntime> = Stream::cpu().runtime()?;
/// assert_eq!(ops.name(), "cpu");
/// assert_eq!(ops.default_stream(Device::CPU)?, Stream::cpu());
/// // The whole runtime is the registry's, and the same instance.
/// let runtime = devmm::runtime_for(Device::CPU)?;
/// assert_eq!(runtime.device_count()?, 1);
/// # Ok::<(), devmm::Error>(())
/// ```
pub trait StreamRuntime: Send + Sync + fmt::Debug {
    /// `"cpu"`, `"cuda"`, `"rocm"`, or a third party's name.
    fn name(&self) -> &str;

    /// The device types this runtime serves; the first is its primary type.
    fn device_types(&self) -> &[DeviceType];

    /// One of the built-in streams of `device`.
    fn stream(&self, device: Device, which: StreamSentinel) -> Result<Stream>;

    /// The default stream of `device`.
    fn default_stream(&self, device: Device) -> Result<Stream> {
        self.stream(device, StreamSentinel::Default)
    }

    /// A new stream on `device`, destroyed when its last clone drops.
    fn create_stream(&self, device: Device) -> Result<Stream>;

    /// A new stream on `device` created with `flags`. Runtimes without
    /// stream flags serve only [`StreamFlags::SyncDefault`](crate::StreamFlags).
    fn create_stream_with_flags(&self, device: Device, flags: StreamFlags) -> Result<Stream> {
        match flags {
            StreamFlags::SyncDefault => self.create_stream(device),
            other => Err(crate::Error::Stream {
                device,
                reason: format!(
                    "the {} runtime cannot create {other:?} streams; use StreamFlags::SyncDefault",
                    self.name()
                ),
            }),
        }
    }

    /// A stream over a native handle the caller owns.
    fn wrap_stream(&self, device: Device, handle: usize) -> Result<Stream>;

    /// The consumer stream a DLPack `__dlpack__(stream=...)` value names on
    /// `device`, or `Ok(None)` when the consumer asked for no
    /// synchronization (`-1`, or nothing on platforms without streams).
    ///
    /// `value` is the protocol's integer as given; `None` means the consumer
    /// passed none, which each platform maps by the DLPack rules (CUDA: the
    /// legacy default stream; ROCm: the default stream; CPU: no stream).
    /// Values the protocol forbids on the platform are refused.
    fn consumer_stream(&self, device: Device, value: Option<i64>) -> Result<Option<Stream>>;

    /// The device whose DLPack consumers get no stream when they name none:
    /// [`consumer_stream`](Self::consumer_stream)`(device, None)` is
    /// `Ok(None)` there, always. A stream keeps this answer, and an export
    /// of that device's memory with no stream named skips the
    /// `consumer_stream` call (a virtual call and its `Result` written
    /// through memory, issue #16). `None`, the default: always ask.
    ///
    /// ```
    /// use devmm::Device;
    ///
    /// // The host has no streams: its consumers never get one.
    /// let cpu = devmm::runtime_for(Device::CPU)?;
    /// assert_eq!(cpu.streamless_device(), Some(Device::CPU));
    /// assert_eq!(cpu.consumer_stream(Device::CPU, None)?, None);
    /// # Ok::<(), devmm::Error>(())
    /// ```
    fn streamless_device(&self) -> Option<Device> {
        None
    }

    /// Copies `src` from the host into device memory at `dst`, ordered on `stream`.
    ///
    /// # Safety
    ///
    /// `dst` must be valid for `src.len()` bytes of writes on `stream`'s device.
    unsafe fn copy_host_to_device(&self, dst: DevicePtr, src: &[u8], stream: &Stream)
    -> Result<()>;

    /// Copies device memory at `src` into `dst` on the host, and waits for it.
    ///
    /// # Safety
    ///
    /// `src` must be valid for `dst.len()` bytes of reads on `stream`'s device.
    unsafe fn copy_device_to_host(
        &self,
        dst: &mut [u8],
        src: DevicePtr,
        stream: &Stream,
    ) -> Result<()>;

    /// Copies `nbytes` between two allocations of the same device.
    ///
    /// # Safety
    ///
    /// Both ranges must be valid for `nbytes` and must not overlap.
    unsafe fn copy_device_to_device(
        &self,
        dst: DevicePtr,
        src: DevicePtr,
        nbytes: usize,
        stream: &Stream,
    ) -> Result<()>;

    /// Copies `nbytes` from `src` to `dst` in the direction `kind` names,
    /// on `stream` (one of this runtime's): the seed's `memcpy`. A copy
    /// touching host memory is done when this returns; one between device
    /// addresses is ordered on `stream`. Null addresses and ranges past the
    /// end of the address space are refused; zero bytes touch nothing.
    ///
    /// The default serves the four named directions through the typed
    /// copies (a host-to-host copy may overlap, as `memmove`) and refuses
    /// [`CopyKind::Default`], which needs a driver that tells memory apart.
    ///
    /// ```
    /// use devmm::{CopyKind, Device, DevicePtr, Stream};
    /// let cpu = devmm::runtime_for(Device::CPU)?;
    /// let (src, mut dst) = (*b"devmm", [0u8; 5]);
    /// let (to, from) = (DevicePtr::from_host_ptr(dst.as_mut_ptr()), DevicePtr::from_host_ptr(src.as_ptr().cast_mut()));
    /// // SAFETY: both are 5 bytes of live host memory.
    /// unsafe { cpu.memcpy(to, from, 5, CopyKind::HostToHost, &Stream::cpu())? };
    /// assert_eq!(&dst, b"devmm");
    /// // The host has no device memory to copy to.
    /// // SAFETY: refused before any byte is touched.
    /// assert!(unsafe { cpu.memcpy(to, from, 5, CopyKind::HostToDevice, &Stream::cpu()) }.is_err());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    ///
    /// # Safety
    ///
    /// `src` is valid for `nbytes` bytes of reads and `dst` for as many
    /// writes, each in the memory `kind` says (host or device of `stream`'s
    /// device), until the copy completes, and host memory in either range
    /// is initialised (the typed copies take it as a byte slice); unless
    /// `kind` is [`CopyKind::HostToHost`], the ranges do not overlap.
    unsafe fn memcpy(
        &self,
        dst: DevicePtr,
        src: DevicePtr,
        nbytes: usize,
        kind: CopyKind,
        stream: &Stream,
    ) -> Result<()> {
        crate::copy_kind::check_addresses(dst, src, nbytes)?;
        if nbytes == 0 {
            return Ok(());
        }
        match kind {
            CopyKind::HostToHost => {
                // SAFETY: the caller vouches for both host ranges.
                unsafe { crate::copy_kind::host_to_host(dst, src, nbytes) };
                Ok(())
            }
            // SAFETY: `src` is `nbytes` of host memory (the caller vouches,
            // and `check_addresses` bounds `nbytes` by `isize::MAX`), not
            // written while the copy reads it (the ranges are disjoint).
            CopyKind::HostToDevice => unsafe {
                let src = std::slice::from_raw_parts(src.as_host_ptr::<u8>(), nbytes);
                self.copy_host_to_device(dst, src, stream)
            },
            // SAFETY: `dst` is `nbytes` of host memory no other reference
            // reaches during the copy (as above).
            CopyKind::DeviceToHost => unsafe {
                let dst = std::slice::from_raw_parts_mut(dst.as_host_ptr::<u8>(), nbytes);
                self.copy_device_to_host(dst, src, stream)
            },
            // SAFETY: the caller vouches for both device ranges.
            CopyKind::DeviceToDevice => unsafe {
                self.copy_device_to_device(dst, src, nbytes, stream)
            },
            CopyKind::Default => Err(Error::InvalidArgument {
                reason: format!(
                    "the {} runtime cannot tell host from device memory; name the copy's direction instead of DEFAULT",
                    self.name()
                ),
            }),
        }
    }

    /// Makes the native stream `consumer` of `producer`'s device wait for
    /// the work queued so far on `producer` (an event on GPUs): the seed's
    /// `make_stream_wait`, the DLPack `stream=` hand-off.
    ///
    /// ```
    /// use devmm::{Device, Stream};
    /// // Host work is done when a call returns: any consumer handle has
    /// // nothing to wait for.
    /// devmm::runtime_for(Device::CPU)?.make_stream_wait(7, &Stream::cpu())?;
    /// # Ok::<(), devmm::Error>(())
    /// ```
    fn make_stream_wait(&self, consumer: usize, producer: &Stream) -> Result<()> {
        self.wrap_stream(producer.device(), consumer)?
            .wait(producer)
    }
}

struct StreamInner {
    device: Device,
    handle: usize,
    owned: bool,
    /// For a per-thread default stream: the thread it belongs to.
    thread: Option<ThreadId>,
    ops: Arc<dyn StreamOps>,
    /// `ops.runtime()` and the device types it serves, asked on first use
    /// (until it answers a runtime):
    /// every copy and export checks them, and asking each time cost two
    /// virtual calls and an `Arc` clone and drop (issue #16).
    runtime: OnceLock<ServingRuntime>,
}

/// A stream's runtime operations, with the device types it serves as a bit set.
struct ServingRuntime {
    runtime: Arc<dyn StreamRuntime>,
    /// Bit `ty as i32` is set for each type in `runtime.device_types()`
    /// (DLPack codes are below 32).
    served: u32,
    /// `runtime.streamless_device()`.
    streamless: Option<Device>,
}

impl ServingRuntime {
    fn new(runtime: Arc<dyn StreamRuntime>) -> ServingRuntime {
        let served = runtime
            .device_types()
            .iter()
            .fold(0, |set, &ty| set | type_bit(ty));
        let streamless = runtime.streamless_device();
        ServingRuntime {
            runtime,
            served,
            streamless,
        }
    }
}

/// The bit of `ty` in [`ServingRuntime::served`].
fn type_bit(ty: DeviceType) -> u32 {
    1 << (ty as u32)
}

impl Drop for StreamInner {
    fn drop(&mut self) {
        if self.owned {
            self.ops.destroy(self.device, self.handle);
        }
    }
}

/// A stream on one device: a native handle and its runtime's ordering
/// operations. Cloning is cheap and shares the handle; a stream the runtime
/// created is destroyed when its last clone drops.
///
/// ```
/// use devmm::Stream;
/// let s = Stream::cpu();
/// assert_eq!(s.handle(), 0); // the CPU runtime's single no-op stream
/// s.synchronize()?;
/// # Ok::<(), devmm::Error>(())
/// ```
#[derive(Clone)]
pub struct Stream {
    inner: Arc<StreamInner>,
}

impl Stream {
    /// Wraps a native handle that the caller keeps alive and destroys.
    pub fn borrowed(device: Device, handle: usize, ops: Arc<dyn StreamOps>) -> Stream {
        Stream::build(device, handle, false, None, ops)
    }

    /// Takes ownership of a native handle: `ops.destroy` runs when the last
    /// clone drops.
    pub fn owned(device: Device, handle: usize, ops: Arc<dyn StreamOps>) -> Stream {
        Stream::build(device, handle, true, None, ops)
    }

    /// The calling thread's per-thread default stream (`cudaStreamPerThread`):
    /// the same handle names another stream on every thread, so the stream
    /// remembers whose it is ([`owner_thread`](Self::owner_thread)).
    pub fn per_thread(device: Device, handle: usize, ops: Arc<dyn StreamOps>) -> Stream {
        let thread = Some(std::thread::current().id());
        Stream::build(device, handle, false, thread, ops)
    }

    fn build(
        device: Device,
        handle: usize,
        owned: bool,
        thread: Option<ThreadId>,
        ops: Arc<dyn StreamOps>,
    ) -> Stream {
        Stream {
            inner: Arc::new(StreamInner {
                device,
                handle,
                owned,
                thread,
                ops,
                runtime: OnceLock::new(),
            }),
        }
    }

    /// For a per-thread default stream, the thread it belongs to; work
    /// ordered on it from any other thread lands on that thread's own
    /// per-thread stream instead.
    ///
    /// ```
    /// assert_eq!(devmm::Stream::cpu().owner_thread(), None);
    /// ```
    pub fn owner_thread(&self) -> Option<ThreadId> {
        self.inner.thread
    }

    /// Whether the handle means this stream on the calling thread: false
    /// only for another thread's per-thread stream.
    pub fn is_usable_here(&self) -> bool {
        self.inner
            .thread
            .is_none_or(|owner| owner == std::thread::current().id())
    }

    /// The device the stream belongs to.
    pub fn device(&self) -> Device {
        self.inner.device
    }

    /// The native handle (`cudaStream_t`, `hipStream_t`, 0 on the CPU).
    pub fn handle(&self) -> usize {
        self.inner.handle
    }

    /// `Ok` when work on memory of `device` can be ordered on this stream:
    /// a stream of another device is an [`Error::Refused`], whose text is
    /// the whole message.
    ///
    /// ```
    /// let stream = devmm::Stream::cpu();
    /// assert!(stream.check_device(devmm::Device::CPU).is_ok());
    /// let refused = stream.check_device(devmm::Device::cuda(0)).unwrap_err();
    /// assert!(refused.to_string().starts_with("stream device cpu:0 does not match"));
    /// ```
    pub fn check_device(&self, device: Device) -> Result<()> {
        if self.device() == device {
            return Ok(());
        }
        Err(Error::Refused {
            reason: format!(
                "stream device {} does not match the memory's device {device}; pass a stream of \
                 {device}",
                self.device()
            ),
        })
    }

    /// The CUDA stream protocol's pair (read by cuda.core and CuPy):
    /// version 0 and the `cudaStream_t`. Only CUDA streams (managed
    /// memory's included) speak it; any other stream has none.
    ///
    /// ```
    /// assert_eq!(devmm::Stream::cpu().cuda_stream(), None);
    /// ```
    pub fn cuda_stream(&self) -> Option<(u32, usize)> {
        Stream::cuda_stream_of(self.device(), self.handle())
    }

    /// [`cuda_stream`](Self::cuda_stream) of a stream on `device` with the
    /// native `handle`, for a binding's stream that has no core stream yet
    /// (made without loading its runtime).
    ///
    /// ```
    /// use devmm::{Device, Stream};
    /// assert_eq!(Stream::cuda_stream_of(Device::cuda(0), 0x10), Some((0, 0x10)));
    /// assert_eq!(Stream::cuda_stream_of(Device::rocm(0), 0x10), None);
    /// ```
    pub fn cuda_stream_of(device: Device, handle: usize) -> Option<(u32, usize)> {
        match device.ty() {
            DeviceType::Cuda | DeviceType::CudaManaged => Some((0, handle)),
            _ => None,
        }
    }

    /// Whether a handle read from the CUDA stream protocol
    /// (`__cuda_stream__`) can name a stream of `device`: on CUDA devices it
    /// is a `cudaStream_t`, and the CPU reads it as its one stream (handle
    /// 0, any other refused by the runtime); on a ROCm device it names
    /// nothing HIP could wait on.
    ///
    /// ```
    /// use devmm::{Device, Stream};
    /// assert!(Stream::takes_cuda_stream_protocol(Device::cuda(0)));
    /// assert!(Stream::takes_cuda_stream_protocol(Device::CPU));
    /// assert!(!Stream::takes_cuda_stream_protocol(Device::rocm(0)));
    /// ```
    pub const fn takes_cuda_stream_protocol(device: Device) -> bool {
        !matches!(device.ty(), DeviceType::Rocm | DeviceType::RocmHost)
    }

    /// The object the stream stands for, when a binding made it for one
    /// ([`StreamOps::origin`]).
    ///
    /// ```
    /// assert!(devmm::Stream::cpu().origin().is_none());
    /// ```
    pub fn origin(&self) -> Option<&(dyn Any + Send + Sync)> {
        self.inner.ops.origin()
    }

    /// The operations table of the runtime the stream belongs to; the
    /// whole [`DeviceRuntime`](crate::DeviceRuntime) of its device is
    /// [`runtime_for`](crate::runtime_for)'s. A runtime's own streams always
    /// have one; a stream a binding made over its own object (a Python
    /// `Stream` subclass) answers the error of looking its device's runtime
    /// up, such as [`Error::RuntimeUnavailable`], while that platform is
    /// not loaded.
    ///
    /// ```
    /// assert_eq!(devmm::Stream::cpu().runtime()?.name(), "cpu");
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn runtime(&self) -> Result<Arc<dyn StreamRuntime>> {
        self.serving().map(|serving| Arc::clone(&serving.runtime))
    }

    /// The cached runtime, asked of the ops on first use and again after a
    /// failed ask (an error is not kept: the platform may load later).
    #[inline]
    fn serving(&self) -> Result<&ServingRuntime> {
        if let Some(serving) = self.inner.runtime.get() {
            return Ok(serving);
        }
        let runtime = Arc::clone(&self.inner.ops).runtime()?;
        Ok(self
            .inner
            .runtime
            .get_or_init(|| ServingRuntime::new(runtime)))
    }

    /// The stream's runtime, checked to serve memory on `device`: what a
    /// copy into or an export of `device` memory ordered on this stream
    /// must go through. Borrowed from the stream: no reference count moves.
    #[inline]
    pub(crate) fn runtime_serving(&self, device: Device) -> Result<&Arc<dyn StreamRuntime>> {
        self.serving_checked(device).map(|serving| &serving.runtime)
    }

    /// The consumer stream a DLPack export of `device` memory ordered on
    /// this stream hands off to, for the protocol's `stream` value: the
    /// runtime's [`consumer_stream`](StreamRuntime::consumer_stream), after
    /// the check of [`runtime_serving`](Self::runtime_serving). No call
    /// when no stream was named on the runtime's
    /// [`streamless_device`](StreamRuntime::streamless_device).
    #[inline]
    pub(crate) fn consumer_for(
        &self,
        device: Device,
        value: Option<i64>,
    ) -> Result<Option<Stream>> {
        let serving = self.serving_checked(device)?;
        if value.is_none() && serving.streamless == Some(device) {
            return Ok(None);
        }
        serving.runtime.consumer_stream(device, value)
    }

    #[inline]
    fn serving_checked(&self, device: Device) -> Result<&ServingRuntime> {
        let serving = self.serving()?;
        if serving.served & type_bit(device.ty()) != 0 {
            Ok(serving)
        } else {
            Err(self.not_served(device, &*serving.runtime))
        }
    }

    /// Why `runtime` (this stream's) cannot order `device` memory; kept out
    /// of line, off the hot path.
    #[cold]
    fn not_served(&self, device: Device, runtime: &dyn StreamRuntime) -> Error {
        Error::Stream {
            device: self.device(),
            reason: format!(
                "memory on {device} is ordered on a stream of the {} runtime, which does not serve {device}; \
                 allocate it on a stream of {device}'s runtime",
                runtime.name()
            ),
        }
    }

    /// Whether dropping the last clone destroys the native stream.
    pub fn is_owned(&self) -> bool {
        self.inner.owned
    }

    /// Blocks until all work queued on this stream has finished. For
    /// another thread's per-thread default stream, whose handle names the
    /// calling thread's own stream here, the whole device is synchronized
    /// (where the runtime can; else an [`Error::Stream`]).
    pub fn synchronize(&self) -> Result<()> {
        if !self.is_usable_here() {
            return self.inner.ops.synchronize_device(self.inner.device);
        }
        self.inner
            .ops
            .synchronize(self.inner.device, self.inner.handle)
    }

    /// Waits for all work queued on the stream's device, on every stream
    /// (`cudaDeviceSynchronize`), where the runtime can.
    pub(crate) fn synchronize_device(&self) -> Result<()> {
        self.inner.ops.synchronize_device(self.inner.device)
    }

    /// Whether the stream is capturing a graph (`cudaStreamIsCapturing`):
    /// work queued on it then becomes part of the graph instead of running.
    /// Another thread's per-thread default stream cannot be asked from
    /// here and answers `false`: every operation devmm orders on such a
    /// stream synchronizes the device, which the driver refuses while a
    /// capture is active.
    ///
    /// ```
    /// assert!(!devmm::Stream::cpu().is_capturing()?);
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn is_capturing(&self) -> Result<bool> {
        if !self.is_usable_here() {
            return Ok(false);
        }
        self.inner
            .ops
            .is_capturing(self.inner.device, self.inner.handle)
    }

    /// `Ok` unless this is another thread's per-thread default stream, on
    /// which `operation` cannot be queued from here (its handle names the
    /// calling thread's own stream): then an [`Error::Stream`] that says so.
    ///
    /// ```
    /// devmm::Stream::cpu().check_usable_here("a copy")?;
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn check_usable_here(&self, operation: &str) -> Result<()> {
        match self.inner.thread {
            Some(owner) if owner != std::thread::current().id() => Err(Error::Stream {
                device: self.device(),
                reason: format!(
                    "{operation} cannot be queued on the per-thread default stream \
                     (PER_THREAD_DEFAULT) of another thread ({owner:?}) from this thread, where \
                     the handle names this thread's own stream; do it on the thread that owns \
                     the stream, or use a created stream"
                ),
            }),
            _ => Ok(()),
        }
    }

    /// Whether this is one of its runtime's built-in default streams
    /// (DEFAULT, LEGACY_DEFAULT or PER_THREAD_DEFAULT), as rmm's
    /// `Stream.is_default()`. The CPU's one stream is its default.
    ///
    /// ```
    /// assert!(devmm::Stream::cpu().is_default()?);
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn is_default(&self) -> Result<bool> {
        let runtime = self.runtime()?;
        for which in [DEFAULT, LEGACY_DEFAULT, PER_THREAD_DEFAULT] {
            if runtime.stream(self.device(), which)?.handle() == self.handle() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Makes this stream wait for the work queued so far on the native
    /// stream `producer` of the same device (a per-thread default stream
    /// handle names the calling thread's). When this is another thread's
    /// per-thread default stream, no wait can be queued on it from here:
    /// the producer is synchronized instead, so everything that thread
    /// queues later follows its work.
    pub fn wait_raw(&self, producer: usize) -> Result<()> {
        if !self.is_usable_here() {
            return self.inner.ops.synchronize(self.inner.device, producer);
        }
        self.inner
            .ops
            .wait(self.inner.device, self.inner.handle, producer)
    }

    /// Makes this stream wait for the work queued so far on `producer`.
    /// Where either is another thread's per-thread default stream, which
    /// no event can be recorded on or wait queued on from this thread, the
    /// producer is synchronized instead (the device, for another thread's
    /// per-thread stream): ordered, at the cost of blocking.
    ///
    /// ```
    /// let (a, b) = (devmm::Stream::cpu(), devmm::Stream::cpu());
    /// a.wait(&b)?;
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn wait(&self, producer: &Stream) -> Result<()> {
        if producer.device() != self.device() {
            return Err(Error::Stream {
                device: self.device(),
                reason: format!(
                    "cannot make a stream on {} wait on a stream of {}; synchronize the producer instead",
                    self.device(),
                    producer.device()
                ),
            });
        }
        if !self.is_usable_here() || !producer.is_usable_here() {
            if self == producer {
                // One thread's per-thread stream: its work is ordered already.
                return Ok(());
            }
            return producer.synchronize();
        }
        self.wait_raw(producer.handle())
    }
}

impl PartialEq for Stream {
    fn eq(&self, other: &Stream) -> bool {
        self.device() == other.device()
            && self.handle() == other.handle()
            && self.inner.thread == other.inner.thread
    }
}

impl Eq for Stream {}

/// Consistent with `==`: the device, the handle and the thread it names.
impl std::hash::Hash for Stream {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.device().hash(state);
        self.handle().hash(state);
        self.inner.thread.hash(state);
    }
}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream")
            .field("device", &self.inner.device)
            .field("handle", &format_args!("{:#x}", self.inner.handle))
            .field("owned", &self.inner.owned)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering::SeqCst;
    use std::sync::atomic::{AtomicBool, AtomicUsize};

    use super::*;

    /// Operations a binding made for an object (its stream), which they
    /// name; their runtime is missing until `loaded` is set, as a binding's
    /// stream's is before its platform's library loads.
    #[derive(Debug, Default)]
    struct ForObject {
        object: &'static str,
        loaded: AtomicBool,
        asked: AtomicUsize,
    }

    impl StreamOps for ForObject {
        fn synchronize(&self, _: Device, _: usize) -> Result<()> {
            Ok(())
        }
        fn wait(&self, _: Device, _: usize, _: usize) -> Result<()> {
            Ok(())
        }
        fn destroy(&self, _: Device, _: usize) {}
        fn runtime(self: Arc<Self>) -> Result<Arc<dyn StreamRuntime>> {
            self.asked.fetch_add(1, SeqCst);
            if self.loaded.load(SeqCst) {
                Ok(crate::runtime::cpu::shared())
            } else {
                Err(Error::RuntimeUnavailable {
                    name: "cpu".into(),
                    reason: "not loaded yet".into(),
                })
            }
        }
        fn origin(&self) -> Option<&(dyn Any + Send + Sync)> {
            Some(&self.object)
        }
    }

    #[test]
    fn a_stream_answers_the_origin_of_its_operations_through_every_clone() {
        let ops = ForObject {
            object: "the object",
            ..ForObject::default()
        };
        let stream = Stream::borrowed(Device::CPU, 0, Arc::new(ops));
        let clone = stream.clone();
        let origin = clone.origin().and_then(|o| o.downcast_ref::<&str>());
        assert_eq!(origin, Some(&"the object"));
        assert!(Stream::cpu().origin().is_none());
    }

    #[test]
    fn a_stream_without_its_runtime_orders_work_and_finds_the_runtime_once_it_loads() {
        let ops = Arc::new(ForObject::default());
        let stream = Stream::borrowed(Device::CPU, 0, Arc::clone(&ops) as Arc<dyn StreamOps>);
        stream.synchronize().unwrap();
        stream.wait(&stream.clone()).unwrap();
        assert!(matches!(
            stream.runtime(),
            Err(Error::RuntimeUnavailable { .. })
        ));
        assert!(matches!(
            stream.is_default(),
            Err(Error::RuntimeUnavailable { .. })
        ));
        assert_eq!(ops.asked.load(SeqCst), 2, "an error is asked again");
        ops.loaded.store(true, SeqCst);
        assert_eq!(stream.runtime().unwrap().name(), "cpu");
        assert!(stream.is_default().unwrap());
        assert_eq!(ops.asked.load(SeqCst), 3, "a runtime is kept");
    }
}
