//! Exporting a block of an IPC-capable pool and importing it in another
//! process, for both platforms (`crate::ipc` is the public side): the
//! driver calls, turned into [`Error`]s, and the imported buffer, whose
//! release frees only this process's mapping and then closes the imported
//! pool.

use std::ffi::{c_int, c_void};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use crate::buffer::DeviceBuffer;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::foreign::ForeignMemoryResource;
use crate::ipc_data::{EXPORT_DATA_BYTES, IpcDescriptor, IpcMemHandle, MEM_HANDLE_BYTES, PciBusId};
use crate::ptr::DevicePtr;
use crate::runtime::driver::Driver;
use crate::stream::Stream;

use super::calls::Opaque;
use super::owned_pool::OwnedPool;
use super::result::{self, check};
use super::{GpuRuntime, Platform, device};

/// `cudaMemHandleTypePosixFileDescriptor` / `hipMemHandleTypePosixFileDescriptor`.
const HANDLE_POSIX_FD: c_int = 1;

/// The call a library without the IPC calls lacks, named for errors.
fn missing<P: Platform>(call: &str) -> Error {
    Error::InvalidArgument {
        reason: format!(
            "the {} library has no {call}, which sharing pool memory between processes needs; \
             install a runtime that has it (CUDA 11.2+, HIP 5.2+)",
            P::RUNTIME
        ),
    }
}

/// `device` as the machine names it, for an export: the importer finds the
/// GPU by it, whatever its own numbering.
fn bus_id<P: Platform>(driver: &Driver<P>, device: Device) -> Result<PciBusId> {
    let text = result::device::pci_bus_id(driver, device)?;
    PciBusId::new(&text).ok_or_else(|| Error::InvalidArgument {
        reason: format!(
            "the {} library named {device}'s PCI bus {text:?}, which is not a bus id; an \
             export needs it to name the GPU to other processes",
            P::RUNTIME
        ),
    })
}

impl<P: Platform> GpuRuntime<P> {
    /// This process's device for memory an exporter had on `exported` (its
    /// own numbering): the GPU at `pci_bus_id` where the exporter named it,
    /// since another process may number its GPUs another way
    /// (`CUDA_VISIBLE_DEVICES`, `HIP_VISIBLE_DEVICES`); else `exported`.
    pub(crate) fn device_here(
        &self,
        exported: Device,
        pci_bus_id: Option<PciBusId>,
    ) -> Result<Device> {
        let Some(wanted) = pci_bus_id else {
            self.check(exported)?;
            return Ok(exported);
        };
        // A process forked after the runtime started is refused before the
        // search asks the driver anything, as every other call is.
        self.driver().owner().check(P::RUNTIME, exported)?;
        let count = self.device_count;
        for ordinal in 0..u32::try_from(count).unwrap_or(u32::MAX) {
            let here = Device::new(P::DEVICE, ordinal);
            if bus_id(self.driver(), here)? == wanted {
                return Ok(here);
            }
        }
        Err(Error::InvalidArgument {
            reason: format!(
                "the memory is on the exporter's {exported}, the GPU at PCI bus {wanted}, which \
                 this process does not see among its {count} {} devices; make that GPU visible \
                 here (CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES)",
                P::RUNTIME
            ),
        })
    }
}

/// A descriptor for the live block `ptr` of `nbytes` in the IPC-capable
/// `pool` on `device`.
pub(crate) fn export<P: Platform>(
    driver: &Arc<Driver<P>>,
    device: Device,
    pool: usize,
    ptr: DevicePtr,
    nbytes: usize,
) -> Result<IpcDescriptor> {
    let calls = driver.roles();
    let to_handle = calls
        .mem_pool_export_to_shareable_handle
        .ok_or_else(|| missing::<P>("cudaMemPoolExportToShareableHandle"))?;
    let pointer = calls
        .mem_pool_export_pointer
        .ok_or_else(|| missing::<P>("cudaMemPoolExportPointer"))?;
    let _active = device::activate(driver, device)?;
    let mut data = [0u8; EXPORT_DATA_BYTES];
    // SAFETY: `data` holds the 64 bytes the call writes; `ptr` is a live
    // block of the pool (the caller's buffer is open).
    let status = unsafe { (pointer.f)(data.as_mut_ptr().cast(), ptr.as_host_ptr::<c_void>()) };
    check(driver, pointer.name, status, Some(device))?;
    let mut fd: c_int = -1;
    // SAFETY: `fd` is valid for the `int` the call writes; `pool` is live
    // (its resource holds it).
    let status = unsafe {
        (to_handle.f)(
            std::ptr::from_mut(&mut fd).cast(),
            pool as *mut c_void,
            HANDLE_POSIX_FD,
            0,
        )
    };
    check(driver, to_handle.name, status, Some(device))?;
    if fd < 0 {
        return Err(Error::InvalidArgument {
            reason: format!(
                "{} returned no file descriptor for the pool on {device}",
                to_handle.name
            ),
        });
    }
    let handle = if P::EXPORT_KEEPS_HANDLE {
        // The pool's own descriptor, which the pool closes: the descriptor
        // owns a copy instead (close-on-exec, as CUDA's is).
        // SAFETY: the pool is live, so its descriptor is open for the call.
        unsafe { BorrowedFd::borrow_raw(fd) }
            .try_clone_to_owned()
            .map_err(|e| Error::Io {
                what: format!(
                    "copying the file descriptor {} gave for the pool on {device}",
                    to_handle.name
                ),
                reason: e.to_string(),
                errno: e.raw_os_error(),
            })?
    } else {
        // SAFETY: the driver returned a new descriptor, the caller's to close.
        unsafe { OwnedFd::from_raw_fd(fd) }
    };
    let bus = bus_id(driver, device)?;
    Ok(crate::ipc_data::descriptor(
        device, bus, nbytes, handle, data,
    ))
}

impl<P: Platform> GpuRuntime<P> {
    /// Maps the block `descriptor` names (checked usable by the caller) as a
    /// buffer on `stream`, a stream of the GPU it is on as this process
    /// numbers it.
    pub(crate) fn import_ipc(
        &self,
        descriptor: &IpcDescriptor,
        stream: &Stream,
    ) -> Result<DeviceBuffer> {
        let device = self.device_here(descriptor.device(), descriptor.pci_bus_id())?;
        stream.check_device(device)?;
        let calls = self.driver().roles();
        let open = calls
            .mem_pool_import_from_shareable_handle
            .ok_or_else(|| missing::<P>("cudaMemPoolImportFromShareableHandle"))?;
        let pointer = calls
            .mem_pool_import_pointer
            .ok_or_else(|| missing::<P>("cudaMemPoolImportPointer"))?;
        let fd = descriptor
            .handle()
            .map(|fd| fd.as_raw_fd())
            .ok_or_else(|| Error::InvalidArgument {
                reason: format!("the IPC descriptor for {device} is closed"),
            })?;
        let driver = Arc::clone(self.driver());
        let _active = device::activate(&driver, device)?;
        let mut handle: *mut c_void = std::ptr::null_mut();
        // SAFETY: `handle` is a valid out-parameter; a POSIX descriptor is
        // passed as its value, and stays open (the descriptor owns it)
        // through the call.
        let status = unsafe {
            (open.f)(
                &mut handle,
                std::ptr::without_provenance_mut(fd as usize),
                HANDLE_POSIX_FD,
                0,
            )
        };
        check(&driver, open.name, status, Some(device))
            .map_err(|e| not_importable(descriptor, e))?;
        let pool = OwnedPool::new(Arc::clone(&driver), device, handle as usize);
        let mut data = *descriptor.export_data();
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: `ptr` is a valid out-parameter; `data` holds the 64 bytes
        // the call reads; the imported pool is live.
        let status = unsafe { (pointer.f)(&mut ptr, handle, data.as_mut_ptr().cast()) };
        check(&driver, pointer.name, status, Some(device))
            .map_err(|e| not_importable(descriptor, e))?;
        let ptr = DevicePtr::from_addr(ptr as usize);
        let owner = format!("IPC import from process {}", descriptor.exporter_pid());
        let release = move || {
            // Only this process's mapping: the exporter's memory stays.
            if let Err(e) = unmap(&pool.driver, device, ptr) {
                tracing::warn!(target: "devmm::runtime", error = %e, "could not release an imported IPC mapping");
            }
            drop(pool);
        };
        let resource = ForeignMemoryResource::new(device, owner, release).synchronizing();
        DeviceBuffer::adopt(ptr, descriptor.nbytes(), resource, stream)
    }
}

/// A descriptor the driver refused to import: bad input, said as such.
fn not_importable(descriptor: &IpcDescriptor, driver: Error) -> Error {
    Error::InvalidArgument {
        reason: format!(
            "the IPC descriptor of {} bytes on {} from process {} cannot be imported ({driver}); \
             pass a descriptor that buffer.ipc_descriptor() made in another process, for a \
             buffer it has not freed",
            descriptor.nbytes(),
            descriptor.device(),
            descriptor.exporter_pid()
        ),
    }
}

/// Frees an imported pointer with `*Free`, which returns once it is done,
/// so the exporter may free its block after this returns. It does not wait
/// for work that uses the pointer ("callers must ensure that all accesses
/// to these pointer have completed before invoking cudaFree"): the
/// importing resource synchronizes the free's stream before this runs
/// ([`ForeignMemoryResource::synchronizing`]).
fn unmap<P: Platform>(driver: &Arc<Driver<P>>, device: Device, ptr: DevicePtr) -> Result<()> {
    let _active = device::activate(driver, device)?;
    let call = driver.roles().free;
    // SAFETY: `ptr` was imported once and is freed once (the adopting
    // resource runs its release once).
    let status = unsafe { (call.f)(ptr.as_host_ptr::<c_void>()) };
    check(driver, call.name, status, Some(device))
}

/// `cudaIpcMemLazyEnablePeerAccess` / `hipIpcMemLazyEnablePeerAccess`: the
/// flag the reference asks `*IpcOpenMemHandle` for.
const IPC_MEM_LAZY_ENABLE_PEER_ACCESS: std::ffi::c_uint = 1;

/// What this module assumes of the headers, for `real_headers`.
#[cfg(all(test, not(miri)))]
pub(super) fn header_facts() -> Vec<(&'static str, i128)> {
    vec![
        (
            "{P}MemHandleTypePosixFileDescriptor",
            HANDLE_POSIX_FD.into(),
        ),
        (
            "{P}IpcMemLazyEnablePeerAccess",
            IPC_MEM_LAZY_ENABLE_PEER_ACCESS.into(),
        ),
        (
            "sizeof({P}IpcMemHandle_t)",
            crate::ipc_data::MEM_HANDLE_BYTES as i128,
        ),
        (
            "sizeof({P}MemPoolPtrExportData)",
            crate::ipc_data::EXPORT_DATA_BYTES as i128,
        ),
    ]
}

/// The legacy handle (`*IpcGetMemHandle`) of the live `*Malloc` block `ptr`
/// of `nbytes` on `device`.
pub(crate) fn get_mem_handle<P: Platform>(
    driver: &Arc<Driver<P>>,
    device: Device,
    ptr: DevicePtr,
    nbytes: usize,
) -> Result<IpcMemHandle> {
    let call = driver
        .roles()
        .ipc_get_mem_handle
        .ok_or_else(|| missing_legacy::<P>("cudaIpcGetMemHandle"))?;
    let _active = device::activate(driver, device)?;
    let mut handle = Opaque([0u8; MEM_HANDLE_BYTES]);
    // SAFETY: `handle` holds the 64 bytes the call writes; `ptr` is a live
    // block of the resource (the caller's buffer is open).
    let status = unsafe { (call.f)(&mut handle, ptr.as_host_ptr::<c_void>()) };
    check(driver, call.name, status, Some(device))?;
    let bus = bus_id(driver, device)?;
    Ok(crate::ipc_data::mem_handle(device, bus, nbytes, handle.0))
}

/// The call a library without the legacy IPC calls lacks, named for errors.
fn missing_legacy<P: Platform>(call: &str) -> Error {
    Error::InvalidArgument {
        reason: format!(
            "the {} library has no {call}, which sharing device memory between processes \
             needs; install a runtime that has it, or share through an IPC pool \
             (enable_ipc=True)",
            P::RUNTIME
        ),
    }
}

impl<P: Platform> GpuRuntime<P> {
    /// Opens the legacy handle `handle` (checked usable by the caller) as a
    /// buffer on `stream`, a stream of the GPU it is on as this process
    /// numbers it; its release is `*IpcCloseMemHandle`.
    pub(crate) fn open_ipc_handle(
        &self,
        handle: &IpcMemHandle,
        stream: &Stream,
    ) -> Result<DeviceBuffer> {
        let device = self.device_here(handle.device(), handle.pci_bus_id())?;
        stream.check_device(device)?;
        let calls = self.driver().roles();
        let open = calls
            .ipc_open_mem_handle
            .ok_or_else(|| missing_legacy::<P>("cudaIpcOpenMemHandle"))?;
        let close = calls
            .ipc_close_mem_handle
            .ok_or_else(|| missing_legacy::<P>("cudaIpcCloseMemHandle"))?;
        let driver = Arc::clone(self.driver());
        let _active = device::activate(&driver, device)?;
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: `ptr` is a valid out-parameter; the handle is passed by
        // value as the 64-byte struct the C API declares.
        let status = unsafe {
            (open.f)(
                &mut ptr,
                Opaque(*handle.handle_bytes()),
                IPC_MEM_LAZY_ENABLE_PEER_ACCESS,
            )
        };
        check(&driver, open.name, status, Some(device)).map_err(|e| Error::InvalidArgument {
            reason: format!(
                "the IPC handle of {} bytes on {device} from process {} cannot be opened \
                     ({e}); pass a handle that buffer.ipc_handle() made in another process, \
                     for a buffer it has not freed",
                handle.nbytes(),
                handle.exporter_pid()
            ),
        })?;
        let ptr = DevicePtr::from_addr(ptr as usize);
        let owner = format!("IPC handle from process {}", handle.exporter_pid());
        let release = move || {
            // Only this process's mapping: the exporter's memory stays.
            let closed = device::activate(&driver, device).and_then(|_active| {
                // SAFETY: `ptr` was opened once and is closed once (the
                // adopting resource runs its release once).
                let status = unsafe { (close.f)(ptr.as_host_ptr::<c_void>()) };
                check(&driver, close.name, status, Some(device))
            });
            if let Err(e) = closed {
                tracing::warn!(target: "devmm::runtime", error = %e, "could not close an opened IPC handle");
            }
        };
        let resource = ForeignMemoryResource::new(device, owner, release).synchronizing();
        DeviceBuffer::adopt(ptr, handle.nbytes(), resource, stream)
    }
}
