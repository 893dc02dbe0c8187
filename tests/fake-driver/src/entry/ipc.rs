//! Sharing a pool's memory with another process: `*MemPoolExportToShareableHandle`,
//! `*MemPoolExportPointer`, `*MemPoolImportFromShareableHandle`, `*MemPoolImportPointer`. The
//! model (a `memfd` per IPC-capable pool) and its rules are in the crate's `ipc` module; a
//! pointer imported here is freed with `*Free` / `*FreeAsync`, which releases only its mapping.
//!
//! ```
//! use fake_driver::{entry::{ipc, pool}, Platform};
//! let p = &Platform::EXAMPLE;
//! let mut props = pool::PoolProps::on_device(0);
//! props.handle_types = 1; // a POSIX file descriptor
//! let mut handle = std::ptr::null_mut();
//! // SAFETY: both pointers are valid.
//! assert_eq!(unsafe { pool::mem_pool_create(p, "cudaMemPoolCreate", &mut handle, (&raw const props).cast()) }, 0);
//! let mut fd: std::ffi::c_int = -1;
//! // SAFETY: `fd` is valid for a write of an `int`.
//! assert_eq!(unsafe { ipc::export_to_shareable_handle(p, "cudaMemPoolExportToShareableHandle", (&raw mut fd).cast(), handle, 1, 0) }, 0);
//! // Importing in the pool's own process is an invalid value.
//! let mut imported = std::ptr::null_mut();
//! let as_handle = std::ptr::without_provenance_mut(fd as usize);
//! // SAFETY: `imported` is valid for a write.
//! assert_eq!(unsafe { ipc::import_from_shareable_handle(p, "cudaMemPoolImportFromShareableHandle", &mut imported, as_handle, 1, 0) }, 1);
//! assert_eq!(pool::mem_pool_destroy(p, "cudaMemPoolDestroy", handle), 0);
//! ```

use std::ffi::{c_int, c_uint, c_void};
use std::os::fd::AsRawFd;

use crate::call::Call;
use crate::entry::pool::HANDLE_POSIX_FD;
use crate::handle;
use crate::ipc::{Imported, Link, EXPORT_DATA_BYTES};
use crate::memory::Kind;
use crate::out::Out;
use crate::platform::{Fault, Platform};
use crate::pool::Pool;

/// `cudaMemPoolExportToShareableHandle(void* shareableHandle, cudaMemPool_t memPool,
/// cudaMemAllocationHandleType handleType, unsigned int flags)`: a descriptor (an `int` written
/// to `handle`) for a pool created with the POSIX file descriptor handle type; any other pool,
/// type or flags is an invalid value. CUDA hands out a new, close-on-exec descriptor the caller
/// closes; HIP the pool's own, the same on every call, which the caller must not close
/// (`Platform::export_keeps_handle`).
///
/// # Safety
/// `handle` is null or valid for a write of an `int`.
pub unsafe fn export_to_shareable_handle(
    platform: &'static Platform,
    name: &'static str,
    handle: *mut c_void,
    pool: *mut c_void,
    handle_type: c_int,
    flags: c_uint,
) -> c_int {
    Call::new(platform, name)
        .arg_hex("pool", pool as usize)
        .arg("type", handle_type)
        .arg("flags", flags)
        .run(|state, args| {
            // SAFETY: this function's contract.
            let out = unsafe { Out::new(handle.cast::<c_int>()) }?;
            if handle_type != HANDLE_POSIX_FD || flags != 0 {
                return Err(Fault::InvalidValue);
            }
            let Some(Link::Exporter(arena)) = &state.pools.get_mut(pool as usize)?.link else {
                return Err(Fault::InvalidValue);
            };
            let fd = if platform.export_keeps_handle {
                // The pool's own descriptor, as HIP hands it out: refused once a caller closed
                // it (the real runtime would hand out the stale number).
                if !arena.descriptor_intact() {
                    return Err(Fault::InvalidValue);
                }
                arena.file.as_raw_fd()
            } else {
                // SAFETY: the arena's descriptor is open; the duplicate is a new descriptor.
                unsafe { libc::fcntl(arena.file.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) }
            };
            if fd < 0 {
                return Err(Fault::OutOfMemory);
            }
            out.set(fd);
            args.note("fd", fd);
            Ok(())
        })
}

/// `cudaMemPoolExportPointer(cudaMemPoolPtrExportData* exportData, void* ptr)`: the 64 bytes
/// naming the live block starting at `ptr` of an IPC-capable pool; anything else is an invalid
/// value.
///
/// # Safety
/// `data` is null or valid for a write of 64 bytes.
pub unsafe fn export_pointer(
    platform: &'static Platform,
    name: &'static str,
    data: *mut c_void,
    ptr: *mut c_void,
) -> c_int {
    Call::new(platform, name)
        .arg_hex("ptr", ptr as usize)
        .run(|state, _| {
            if data.is_null() {
                return Err(Fault::InvalidValue);
            }
            let pool = state
                .memory
                .find(ptr, 1)
                .filter(|a| a.shared.as_ref().is_some_and(|m| !m.imported))
                .and_then(|a| a.pool)
                .ok_or(Fault::InvalidValue)?;
            let mapping = state.memory.shared(ptr).ok_or(Fault::InvalidValue)?;
            let Some(Link::Exporter(arena)) = &state.pools.get_mut(pool)?.link else {
                return Err(Fault::InvalidValue);
            };
            let bytes = arena.export(mapping);
            // SAFETY: `data` is valid for 64 bytes by this function's contract.
            unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), data.cast::<u8>(), EXPORT_DATA_BYTES)
            };
            Ok(())
        })
}

/// `cudaMemPoolImportFromShareableHandle(cudaMemPool_t* memPool, void* shareableHandle,
/// cudaMemAllocationHandleType handleType, unsigned int flags)`: for a POSIX file descriptor
/// the handle is the descriptor's value; the caller keeps (and closes) it. The pool makes no
/// allocations; it only imports pointers.
///
/// # Safety
/// `out` is null or valid for a write.
pub unsafe fn import_from_shareable_handle(
    platform: &'static Platform,
    name: &'static str,
    out: *mut *mut c_void,
    handle: *mut c_void,
    handle_type: c_int,
    flags: c_uint,
) -> c_int {
    Call::new(platform, name)
        .arg("fd", handle as usize)
        .arg("type", handle_type)
        .arg("flags", flags)
        .run(|state, args| {
            // SAFETY: this function's contract.
            let out = unsafe { Out::new(out) }?;
            if handle_type != HANDLE_POSIX_FD || flags != 0 {
                return Err(Fault::InvalidValue);
            }
            let fd = c_int::try_from(handle as usize).map_err(|_| Fault::InvalidValue)?;
            let (imported, physical) = Imported::open(fd, platform.device_name)?;
            // The exporter's GPU as this process numbers it, if it sees it at all.
            let device = state.devices.local(physical)?;
            let mut pool = Pool::new(device, 0);
            pool.link = Some(Link::Importer(imported));
            let created = state.pools.create(pool);
            out.set(handle::to_ptr(created));
            args.note("device", device);
            args.note_hex("pool", created);
            Ok(())
        })
}

/// `cudaMemPoolImportPointer(void** ptr, cudaMemPool_t memPool, cudaMemPoolPtrExportData*
/// exportData)`: maps the block `data` names, exported from the pool `pool` was imported
/// from; anything else is an invalid value.
///
/// # Safety
/// `ptr` is null or valid for a write; `data` is null or valid for a read of 64 bytes.
pub unsafe fn import_pointer(
    platform: &'static Platform,
    name: &'static str,
    ptr: *mut *mut c_void,
    pool: *mut c_void,
    data: *const c_void,
) -> c_int {
    Call::new(platform, name)
        .arg_hex("pool", pool as usize)
        .run(|state, args| {
            // SAFETY: this function's contract.
            let out = unsafe { Out::new(ptr) }?;
            if data.is_null() {
                return Err(Fault::InvalidValue);
            }
            let mut bytes = [0u8; EXPORT_DATA_BYTES];
            // SAFETY: `data` is valid for 64 bytes by this function's contract.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    data.cast::<u8>(),
                    bytes.as_mut_ptr(),
                    EXPORT_DATA_BYTES,
                )
            };
            let found = state.pools.get_mut(pool as usize)?;
            let device = found.device;
            let Some(Link::Importer(imported)) = &found.link else {
                return Err(Fault::InvalidValue);
            };
            let mapping = imported.import(&bytes)?;
            let block =
                state
                    .memory
                    .insert_shared(mapping, Kind::Device, device, Some(pool as usize))?;
            out.set(block);
            args.note_hex("ptr", block as usize);
            Ok(())
        })
}

/// `cudaIpcMemHandle_t` / `hipIpcMemHandle_t`: `struct { char reserved[64]; }`, passed by value
/// (`struct 64` in the API descriptions).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Opaque<const N: usize>(pub [u8; N]);

/// `cudaIpcMemLazyEnablePeerAccess` / `hipIpcMemLazyEnablePeerAccess`: the only flag, and the
/// one the reference says to pass.
pub const IPC_MEM_LAZY_ENABLE_PEER_ACCESS: c_uint = 1;

/// `cudaIpcGetMemHandle(cudaIpcMemHandle_t* handle, void* devPtr)`: the 64 bytes another
/// process opens the `*Malloc` block starting at `ptr` with. Anything else (pool or
/// `*MallocAsync` memory, managed or pinned host memory, an interior or unknown pointer, a
/// block opened from another process) is an invalid value.
///
/// ```
/// use fake_driver::entry::{ipc, memory};
/// use fake_driver::Platform;
/// let p = &Platform::EXAMPLE;
/// let mut handle = ipc::Opaque([0u8; 64]);
/// let (mut plain, mut ordered, mut managed) =
///     (std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut());
/// // SAFETY: every out-pointer is valid for a write.
/// unsafe {
///     assert_eq!(memory::malloc(p, "cudaMalloc", &mut plain, 256), 0);
///     assert_eq!(memory::malloc_async(p, "cudaMallocAsync", &mut ordered, 256, std::ptr::null_mut()), 0);
///     assert_eq!(memory::malloc_managed(p, "cudaMallocManaged", &mut managed, 256, 1), 0);
///     assert_eq!(ipc::ipc_get_mem_handle(p, "cudaIpcGetMemHandle", &mut handle, plain), 0);
///     // Pool (`*MallocAsync`) and managed memory, an interior pointer: invalid values.
///     for refused in [ordered, managed, plain.cast::<u8>().add(1).cast()] {
///         assert_eq!(ipc::ipc_get_mem_handle(p, "cudaIpcGetMemHandle", &mut handle, refused), 1);
///     }
///     // The exporting process cannot open its own handle, nor pass other flags.
///     let mut opened = std::ptr::null_mut();
///     assert_eq!(ipc::ipc_open_mem_handle(p, "cudaIpcOpenMemHandle", &mut opened, handle, 1), 1);
///     assert_eq!(ipc::ipc_open_mem_handle(p, "cudaIpcOpenMemHandle", &mut opened, handle, 0), 1);
/// }
/// // Only an opened pointer closes; `*Malloc` memory is freed with `*Free`.
/// assert_eq!(ipc::ipc_close_mem_handle(p, "cudaIpcCloseMemHandle", plain), 1);
/// assert_eq!(memory::free(p, "cudaFree", plain), 0);
/// assert_eq!(memory::free(p, "cudaFree", managed), 0);
/// assert_eq!(memory::free(p, "cudaFree", ordered), 0);
/// ```
///
/// # Safety
/// `handle` is null or valid for a write of 64 bytes.
pub unsafe fn ipc_get_mem_handle(
    platform: &'static Platform,
    name: &'static str,
    handle: *mut Opaque<EXPORT_DATA_BYTES>,
    ptr: *mut c_void,
) -> c_int {
    Call::new(platform, name)
        .arg_hex("ptr", ptr as usize)
        .run(|state, _| {
            // SAFETY: this function's contract.
            let out = unsafe { Out::new(handle) }?;
            let allocation = state
                .memory
                .find(ptr, 1)
                .filter(|a| a.kind == Kind::Device && a.pool.is_none())
                .ok_or(Fault::InvalidValue)?;
            let device = allocation.device.ok_or(Fault::InvalidValue)?;
            let mapping = state
                .memory
                .shared(ptr)
                .filter(|m| !m.imported)
                .ok_or(Fault::InvalidValue)?;
            let physical = state.devices.physical(device)?;
            let bytes = state
                .legacy
                .handle(physical, mapping)
                .ok_or(Fault::InvalidValue)?;
            out.set(Opaque(bytes));
            Ok(())
        })
}

/// `cudaIpcOpenMemHandle(void** devPtr, cudaIpcMemHandle_t handle, unsigned int flags)`: maps
/// the block another process exported, on the device it lives on. `flags` must be
/// `*IpcMemLazyEnablePeerAccess`; a handle this process exported, or one of a block or process
/// gone, is an invalid value. The pointer is released with `*IpcCloseMemHandle` only.
///
/// # Safety
/// `ptr` is null or valid for a write.
pub unsafe fn ipc_open_mem_handle(
    platform: &'static Platform,
    name: &'static str,
    ptr: *mut *mut c_void,
    handle: Opaque<EXPORT_DATA_BYTES>,
    flags: c_uint,
) -> c_int {
    Call::new(platform, name)
        .arg("flags", flags)
        .run(|state, args| {
            // SAFETY: this function's contract.
            let out = unsafe { Out::new(ptr) }?;
            if flags != IPC_MEM_LAZY_ENABLE_PEER_ACCESS {
                return Err(Fault::InvalidValue);
            }
            // The reference: a handle this process already opened returns the same pointer,
            // its count one higher.
            let key = crate::ipc::handle_key(&handle.0);
            if let Some(opened) = state.legacy.opened.get_mut(&key) {
                opened.1 += 1;
                out.set(opened.0 as *mut c_void);
                args.note_hex("ptr", opened.0);
                return Ok(());
            }
            let (mapping, physical) = crate::ipc::open_handle(&handle.0, platform.device_name)?;
            let device = state.devices.local(physical)?;
            let block = state
                .memory
                .insert_shared(mapping, Kind::IpcOpened, device, None)?;
            state.legacy.opened.insert(key, (block as usize, 1));
            out.set(block);
            args.note("device", device);
            args.note_hex("ptr", block as usize);
            Ok(())
        })
}

/// `cudaIpcCloseMemHandle(void* devPtr)`: closes one opening of a pointer
/// `*IpcOpenMemHandle` returned, unmapping it at the last; the exporter's memory stays. Any
/// other pointer is an invalid value.
pub fn ipc_close_mem_handle(
    platform: &'static Platform,
    name: &'static str,
    ptr: *mut c_void,
) -> c_int {
    Call::new(platform, name)
        .arg_hex("ptr", ptr as usize)
        .run(|state, _| {
            let key = state
                .legacy
                .opened
                .iter()
                .find(|(_, opened)| opened.0 == ptr as usize)
                .map(|(key, _)| *key)
                .ok_or(Fault::InvalidValue)?;
            let count = state.legacy.opened.get_mut(&key).map(|opened| {
                opened.1 -= 1;
                opened.1
            });
            if count == Some(0) {
                state.legacy.opened.remove(&key);
                let allocation = state.memory.remove(ptr, &[Kind::IpcOpened])?;
                state.memory.retire(allocation);
            }
            Ok(())
        })
}
