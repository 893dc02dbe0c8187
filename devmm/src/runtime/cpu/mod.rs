//! The CPU runtime: a real backend over libc that needs no hardware.
//!
//! It has one device (`cpu:0`), one stream (handle 0, every operation a
//! no-op because host calls complete before they return), and memcpy as
//! `copy_nonoverlapping`. Every GPU-free test runs on it.

pub mod memory;
mod stream;

use std::sync::{Arc, OnceLock};

use crate::copy_kind::CopyKind;
use crate::device::{Device, DeviceType};
use crate::error::{Error, Result};
use crate::ptr::DevicePtr;
use crate::resource::{MemoryInfo, MemoryResource};
use crate::stream::{Stream, StreamRuntime, StreamSentinel};

use super::{ActivationGuard, DeviceRuntime, RuntimeRegistration};

/// The CPU runtime.
///
/// ```
/// let rt = devmm::runtime_for("cpu")?;
/// let info = rt.memory_info(devmm::Device::CPU)?;
/// assert!(info.total >= info.free && info.total > 0);
/// # Ok::<(), devmm::Error>(())
/// ```
#[derive(Debug, Default)]
pub struct CpuRuntime {
    default_resource: OnceLock<Arc<dyn MemoryResource>>,
}

pub(crate) fn registration() -> RuntimeRegistration {
    RuntimeRegistration {
        name: "cpu",
        device_types: &[DeviceType::Cpu],
        probe: || true,
        load: || Ok(shared() as Arc<dyn DeviceRuntime>),
    }
}

/// The process-wide CPU runtime: what the registry hands out and what the
/// CPU stream carries.
pub(crate) fn shared() -> Arc<CpuRuntime> {
    static SHARED: OnceLock<Arc<CpuRuntime>> = OnceLock::new();
    Arc::clone(SHARED.get_or_init(Arc::default))
}

/// Checks that `device` is `cpu:0`, the only device this runtime has.
pub(crate) fn check_device(device: Device) -> Result<()> {
    if device == Device::CPU {
        Ok(())
    } else {
        Err(Error::InvalidArgument {
            reason: format!(
                "the cpu runtime serves cpu devices and has only cpu:0, not {device}; pass cpu:0"
            ),
        })
    }
}

/// Free and total physical memory of the host.
pub(crate) fn host_memory_info() -> Result<MemoryInfo> {
    // SAFETY: sysconf only reads system configuration.
    let (page, total, free) = unsafe {
        (
            libc::sysconf(libc::_SC_PAGESIZE),
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_AVPHYS_PAGES),
        )
    };
    let bytes = |pages: libc::c_long| -> Result<usize> {
        let pages = usize::try_from(pages).map_err(|_| Error::RuntimeUnavailable {
            name: "cpu".into(),
            reason: "sysconf could not report physical memory".into(),
        })?;
        Ok(pages.saturating_mul(usize::try_from(page).unwrap_or(4096)))
    };
    Ok(MemoryInfo {
        free: bytes(free)?,
        total: bytes(total)?,
    })
}

impl StreamRuntime for CpuRuntime {
    fn name(&self) -> &str {
        "cpu"
    }

    fn device_types(&self) -> &[DeviceType] {
        &[DeviceType::Cpu]
    }

    fn stream(&self, device: Device, _which: StreamSentinel) -> Result<Stream> {
        check_device(device)?;
        Ok(Stream::cpu())
    }

    fn create_stream(&self, device: Device) -> Result<Stream> {
        self.stream(device, StreamSentinel::Default)
    }

    /// Host calls finish before they return: every flag gives the one stream.
    fn create_stream_with_flags(
        &self,
        device: Device,
        _flags: crate::stream::StreamFlags,
    ) -> Result<Stream> {
        self.create_stream(device)
    }

    fn wrap_stream(&self, device: Device, handle: usize) -> Result<Stream> {
        check_device(device)?;
        stream::check_handle(handle)?;
        Ok(Stream::cpu())
    }

    /// Host work is complete when a call returns: cpu:0 consumers that name
    /// no stream need none.
    fn streamless_device(&self) -> Option<Device> {
        Some(Device::CPU)
    }

    fn consumer_stream(&self, device: Device, value: Option<i64>) -> Result<Option<Stream>> {
        check_device(device)?;
        match value {
            // Host work is complete when a call returns: nothing to order,
            // and -1 asks for no ordering on every device.
            None | Some(-1) => Ok(None),
            // Any other value names a stream, and the cpu has none.
            Some(other) => Err(Error::Stream {
                device,
                reason: format!(
                    "stream={other} was passed for a cpu tensor, which has no streams; CPU consumers must pass stream=None or -1"
                ),
            }),
        }
    }

    unsafe fn copy_host_to_device(
        &self,
        dst: DevicePtr,
        src: &[u8],
        stream: &Stream,
    ) -> Result<()> {
        check_device(stream.device())?;
        // SAFETY: the caller guarantees `dst` is valid for `src.len()` bytes;
        // a live Rust slice cannot overlap memory we are allowed to write.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_host_ptr(), src.len()) };
        Ok(())
    }

    unsafe fn copy_device_to_host(
        &self,
        dst: &mut [u8],
        src: DevicePtr,
        stream: &Stream,
    ) -> Result<()> {
        check_device(stream.device())?;
        // SAFETY: the caller guarantees `src` is valid for `dst.len()` bytes;
        // `dst` is an exclusive borrow, so the ranges cannot overlap.
        unsafe { std::ptr::copy_nonoverlapping(src.as_host_ptr(), dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    unsafe fn copy_device_to_device(
        &self,
        dst: DevicePtr,
        src: DevicePtr,
        nbytes: usize,
        stream: &Stream,
    ) -> Result<()> {
        check_device(stream.device())?;
        // SAFETY: the caller guarantees both ranges are valid and disjoint.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_host_ptr::<u8>(), dst.as_host_ptr(), nbytes)
        };
        Ok(())
    }

    /// Host to host only, as `memmove` (the ranges may overlap).
    unsafe fn memcpy(
        &self,
        dst: DevicePtr,
        src: DevicePtr,
        nbytes: usize,
        kind: CopyKind,
        stream: &Stream,
    ) -> Result<()> {
        check_device(stream.device())?;
        if kind != CopyKind::HostToHost {
            return Err(Error::InvalidArgument {
                reason: format!(
                    "the cpu runtime copies host to host only, not {}; pass HOST_TO_HOST",
                    kind.name()
                ),
            });
        }
        crate::copy_kind::check_addresses(dst, src, nbytes)?;
        // SAFETY: the caller vouches for both ranges.
        unsafe { crate::copy_kind::host_to_host(dst, src, nbytes) };
        Ok(())
    }

    /// Host work is done when a call returns, so no consumer stream has
    /// anything to wait for, whatever its handle (the seed's CPU runtime
    /// ignores it too).
    fn make_stream_wait(&self, _consumer: usize, producer: &Stream) -> Result<()> {
        check_device(producer.device())
    }
}

impl DeviceRuntime for CpuRuntime {
    fn device_count(&self) -> Result<usize> {
        Ok(1)
    }

    fn memory_info(&self, device: Device) -> Result<MemoryInfo> {
        check_device(device)?;
        host_memory_info()
    }

    fn activate(&self, device: Device) -> Result<ActivationGuard> {
        check_device(device)?;
        Ok(ActivationGuard::noop())
    }

    fn default_resource(&self, device: Device) -> Result<Arc<dyn MemoryResource>> {
        check_device(device)?;
        Ok(Arc::clone(self.default_resource.get_or_init(|| {
            Arc::new(memory::MallocMemoryResource::new())
        })))
    }
}
