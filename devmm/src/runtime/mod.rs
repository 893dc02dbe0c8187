//! Runtimes: one per platform, each the single place that talks to its driver.
//!
//! A [`DeviceRuntime`] enumerates devices, reports memory, makes streams,
//! copies bytes, activates devices and picks the default resource. Runtimes
//! are discovered by name: [`runtime_names`] only probes, [`runtime_for`]
//! loads once and hands out the same instance afterwards.

pub mod cpu;
pub mod cuda;
mod description;
mod discovery;
mod driver;
mod fork;
mod gpu;
mod registry;
pub mod rocm;

use std::fmt;
use std::sync::Arc;

use crate::copy::CopyKind;
use crate::device::{Device, DeviceType};
use crate::error::{Error, Result};
use crate::ptr::DevicePtr;
use crate::resource::{MemoryInfo, MemoryResource};
use crate::stream::{Stream, StreamFlags, StreamSentinel};

pub use description::{DeviceDescription, LibraryVersions};
pub use gpu::memory::GPU_ALIGNMENT;
pub use gpu::pool::PoolOptions;
pub use registry::{
    RUNTIME_ENV, RuntimeRegistration, RuntimeSelector, available_runtimes, check_runtime_override,
    check_runtime_plugin, default_device, register_external_runtime, register_runtime, runtime_for,
    runtime_names, set_external_runtimes, stream_for,
};

/// Everything devmm needs from one platform.
///
/// ```
/// use devmm::{runtime_for, Device};
/// let cpu = runtime_for(Device::CPU)?;
/// assert_eq!(cpu.name(), "cpu");
/// assert_eq!(cpu.devices()?, vec![Device::CPU]);
/// assert_eq!(cpu.default_stream(Device::CPU)?.handle(), 0);
/// # Ok::<(), devmm::Error>(())
/// ```
pub trait DeviceRuntime: Send + Sync + fmt::Debug {
    /// `"cpu"`, `"cuda"`, `"rocm"`, or a third party's name.
    fn name(&self) -> &str;

    /// The device types this runtime serves; the first is its primary type.
    fn device_types(&self) -> &[DeviceType];

    /// How many devices of the primary type exist.
    fn device_count(&self) -> Result<usize>;

    /// How many devices of type `ty` the runtime serves: the primary type's
    /// [`device_count`](Self::device_count); for the other types it serves
    /// (pinned and managed memory, device 0 for DLPack) one when it has a
    /// device at all; none of a type it does not serve.
    ///
    /// ```
    /// use devmm::{runtime_for, DeviceType};
    /// let cpu = runtime_for("cpu")?;
    /// assert_eq!((cpu.device_count_of(DeviceType::Cpu)?, cpu.device_count_of(DeviceType::Cuda)?), (1, 0));
    /// # Ok::<(), devmm::Error>(())
    /// ```
    fn device_count_of(&self, ty: DeviceType) -> Result<usize> {
        let types = self.device_types();
        if types.first() == Some(&ty) {
            self.device_count()
        } else if types.contains(&ty) {
            Ok(self.device_count()?.min(1))
        } else {
            Ok(0)
        }
    }

    /// The devices of the primary type, `index` 0 upwards.
    fn devices(&self) -> Result<Vec<Device>> {
        let ty = self.device_types()[0];
        (0..self.device_count()?)
            .map(|i| Ok(Device::try_new(ty, u32::try_from(i).unwrap_or(u32::MAX))?))
            .collect()
    }

    /// Free and total memory of `device`.
    fn memory_info(&self, device: Device) -> Result<MemoryInfo>;

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
    /// use devmm::{CopyKind, Device, DevicePtr, DeviceRuntime, Stream};
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
        crate::copy::check_addresses(dst, src, nbytes)?;
        if nbytes == 0 {
            return Ok(());
        }
        match kind {
            CopyKind::HostToHost => {
                // SAFETY: the caller vouches for both host ranges.
                unsafe { crate::copy::host_to_host(dst, src, nbytes) };
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
    /// use devmm::{Device, DeviceRuntime, Stream};
    /// // Host work is done when a call returns: any consumer handle has
    /// // nothing to wait for.
    /// devmm::runtime_for(Device::CPU)?.make_stream_wait(7, &Stream::cpu())?;
    /// # Ok::<(), devmm::Error>(())
    /// ```
    fn make_stream_wait(&self, consumer: usize, producer: &Stream) -> Result<()> {
        self.wrap_stream(producer.device(), consumer)?
            .wait(producer)
    }

    /// Makes `device` the active one for this thread until the guard drops.
    fn activate(&self, device: Device) -> Result<ActivationGuard>;

    /// The resource to use for `device` when the registry has none.
    fn default_resource(&self, device: Device) -> Result<Arc<dyn MemoryResource>>;

    /// What the runtime can say about `device` beyond its memory (name,
    /// compute capability, PCI bus id, memory pools); nothing by default.
    fn describe(&self, device: Device) -> Result<DeviceDescription> {
        let _ = device;
        Ok(DeviceDescription::default())
    }

    /// The runtime library's and the driver's versions, for runtimes over
    /// a vendor library; `None` by default.
    fn library_versions(&self) -> Result<Option<LibraryVersions>> {
        Ok(None)
    }

    /// Every vendor library discovery tried before this runtime loaded,
    /// each as `path (outcome)` with the one used last, so a library that
    /// loads but cannot run (a CUDA 13 runtime over a CUDA 12 driver) and
    /// was passed over is reported; empty by default, and for a library
    /// named by path.
    ///
    /// ```
    /// let cpu = devmm::runtime_for("cpu")?;
    /// assert!(cpu.library_discovery().is_empty());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    fn library_discovery(&self) -> &[String] {
        &[]
    }

    /// The file (or name) the runtime's vendor library was loaded from,
    /// for runtimes over one; `None` by default.
    fn library_file(&self) -> Option<String> {
        None
    }
}

/// Restores the previously active device when dropped.
///
/// ```
/// let rt = devmm::runtime_for("cpu")?;
/// let _guard = rt.activate(devmm::Device::CPU)?;
/// # Ok::<(), devmm::Error>(())
/// ```
#[must_use = "the device is only active while the guard lives"]
pub struct ActivationGuard {
    restore: Option<Box<dyn FnOnce()>>,
    /// Not `Send`: the active device is per thread, so the guard must drop
    /// on the thread that made it.
    _not_send: std::marker::PhantomData<*const ()>,
}

impl ActivationGuard {
    /// A guard with nothing to restore (platforms without device state).
    pub fn noop() -> ActivationGuard {
        ActivationGuard {
            restore: None,
            _not_send: std::marker::PhantomData,
        }
    }

    /// A guard that runs `restore` on drop.
    pub fn new(restore: impl FnOnce() + 'static) -> ActivationGuard {
        ActivationGuard {
            restore: Some(Box::new(restore)),
            _not_send: std::marker::PhantomData,
        }
    }
}

impl Drop for ActivationGuard {
    fn drop(&mut self) {
        if let Some(restore) = self.restore.take() {
            restore();
        }
    }
}

impl fmt::Debug for ActivationGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActivationGuard")
            .field("restores", &self.restore.is_some())
            .finish()
    }
}

/// The runtimes devmm ships, in discovery order.
fn builtin_registrations() -> Vec<RuntimeRegistration> {
    vec![
        cpu::registration(),
        cuda::registration(),
        rocm::registration(),
    ]
}
