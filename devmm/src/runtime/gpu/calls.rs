//! The entry points the shared GPU code calls, by role. The generated
//! tables fill [`Calls`] themselves (`as ROLE` tags in `devmm/api/*.api`),
//! so the mapping from role to C function lives in the description files,
//! and the loader resolves it once, with the table.
//!
//! This module is the support path the generated tables are written
//! against (`devmm/build.rs`): it also names the loader's trait and error.

use std::ffi::{c_char, c_int, c_uint, c_void};

pub(crate) use crate::runtime::driver::{DriverTable, MissingSymbol};

use super::{Handle, Status};

/// An opaque C struct of `N` bytes passed by value (`struct N` in the
/// descriptions): `cudaIpcMemHandle_t` is `struct { char reserved[64]; }`,
/// which `#[repr(C)]` lays out and passes the same way.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Opaque<const N: usize>(pub [u8; N]);

/// A driver entry point and its C name, for error messages.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Call<F> {
    pub(crate) name: &'static str,
    pub(crate) f: F,
}

/// `*StreamGetCaptureInfo` in CUDA 13's shape: stream, status, capture id,
/// then graph, dependencies, edge data and their count, which devmm passes
/// as nulls (see the descriptions).
pub(crate) type CaptureInfo = unsafe extern "C" fn(
    Handle,
    *mut c_int,
    *mut u64,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    *mut usize,
) -> Status;

/// The entry points the shared runtime uses, in the shape both the CUDA
/// runtime and HIP give them.
#[derive(Clone, Copy, Debug)]
pub struct Calls {
    pub(crate) get_device_count: Call<unsafe extern "C" fn(*mut c_int) -> Status>,
    pub(crate) get_device: Call<unsafe extern "C" fn(*mut c_int) -> Status>,
    pub(crate) set_device: Call<unsafe extern "C" fn(c_int) -> Status>,
    pub(crate) mem_get_info: Call<unsafe extern "C" fn(*mut usize, *mut usize) -> Status>,
    pub(crate) device_get_attribute: Call<unsafe extern "C" fn(*mut c_int, c_int, c_int) -> Status>,
    pub(crate) device_get_pci_bus_id:
        Call<unsafe extern "C" fn(*mut c_char, c_int, c_int) -> Status>,
    pub(crate) device_synchronize: Call<unsafe extern "C" fn() -> Status>,
    pub(crate) get_device_properties_v2:
        Option<Call<unsafe extern "C" fn(*mut c_void, c_int) -> Status>>,
    pub(crate) get_device_properties:
        Option<Call<unsafe extern "C" fn(*mut c_void, c_int) -> Status>>,
    pub(crate) malloc: Call<unsafe extern "C" fn(*mut *mut c_void, usize) -> Status>,
    pub(crate) free: Call<unsafe extern "C" fn(*mut c_void) -> Status>,
    pub(crate) malloc_async:
        Option<Call<unsafe extern "C" fn(*mut *mut c_void, usize, Handle) -> Status>>,
    pub(crate) free_async: Option<Call<unsafe extern "C" fn(*mut c_void, Handle) -> Status>>,
    pub(crate) mem_pool_create:
        Option<Call<unsafe extern "C" fn(*mut Handle, *const c_void) -> Status>>,
    pub(crate) mem_pool_destroy: Option<Call<unsafe extern "C" fn(Handle) -> Status>>,
    pub(crate) malloc_from_pool_async:
        Option<Call<unsafe extern "C" fn(*mut *mut c_void, usize, Handle, Handle) -> Status>>,
    pub(crate) mem_pool_get_attribute:
        Option<Call<unsafe extern "C" fn(Handle, c_int, *mut c_void) -> Status>>,
    pub(crate) mem_pool_set_attribute:
        Option<Call<unsafe extern "C" fn(Handle, c_int, *mut c_void) -> Status>>,
    pub(crate) mem_pool_trim_to: Option<Call<unsafe extern "C" fn(Handle, usize) -> Status>>,
    pub(crate) mem_pool_set_access:
        Option<Call<unsafe extern "C" fn(Handle, *const c_void, usize) -> Status>>,
    pub(crate) mem_pool_export_to_shareable_handle:
        Option<Call<unsafe extern "C" fn(*mut c_void, Handle, c_int, c_uint) -> Status>>,
    pub(crate) mem_pool_export_pointer:
        Option<Call<unsafe extern "C" fn(*mut c_void, *mut c_void) -> Status>>,
    pub(crate) mem_pool_import_from_shareable_handle:
        Option<Call<unsafe extern "C" fn(*mut Handle, *mut c_void, c_int, c_uint) -> Status>>,
    pub(crate) mem_pool_import_pointer:
        Option<Call<unsafe extern "C" fn(*mut *mut c_void, Handle, *mut c_void) -> Status>>,
    pub(crate) ipc_get_mem_handle:
        Option<Call<unsafe extern "C" fn(*mut Opaque<64>, *mut c_void) -> Status>>,
    pub(crate) ipc_open_mem_handle:
        Option<Call<unsafe extern "C" fn(*mut *mut c_void, Opaque<64>, c_uint) -> Status>>,
    pub(crate) ipc_close_mem_handle: Option<Call<unsafe extern "C" fn(*mut c_void) -> Status>>,
    pub(crate) host_free: Call<unsafe extern "C" fn(*mut c_void) -> Status>,
    pub(crate) malloc_managed:
        Call<unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> Status>,
    pub(crate) mem_prefetch_async:
        Option<Call<unsafe extern "C" fn(*const c_void, usize, c_int, Handle) -> Status>>,
    pub(crate) mem_advise:
        Option<Call<unsafe extern "C" fn(*const c_void, usize, c_int, c_int) -> Status>>,
    pub(crate) memcpy_async:
        Call<unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int, Handle) -> Status>,
    pub(crate) stream_create_with_flags: Call<unsafe extern "C" fn(*mut Handle, c_uint) -> Status>,
    pub(crate) stream_destroy: Call<unsafe extern "C" fn(Handle) -> Status>,
    pub(crate) stream_synchronize: Call<unsafe extern "C" fn(Handle) -> Status>,
    pub(crate) stream_wait_event: Call<unsafe extern "C" fn(Handle, Handle, c_uint) -> Status>,
    pub(crate) stream_is_capturing:
        Option<Call<unsafe extern "C" fn(Handle, *mut c_int) -> Status>>,
    pub(crate) stream_get_capture_info: Option<Call<CaptureInfo>>,
    pub(crate) event_create_with_flags: Call<unsafe extern "C" fn(*mut Handle, c_uint) -> Status>,
    pub(crate) event_record: Call<unsafe extern "C" fn(Handle, Handle) -> Status>,
    pub(crate) event_destroy: Call<unsafe extern "C" fn(Handle) -> Status>,
    pub(crate) get_last_error: Call<unsafe extern "C" fn() -> Status>,
    pub(crate) get_error_name: Call<unsafe extern "C" fn(Status) -> *const c_char>,
    pub(crate) get_error_string: Call<unsafe extern "C" fn(Status) -> *const c_char>,
    pub(crate) runtime_get_version: Call<unsafe extern "C" fn(*mut c_int) -> Status>,
    pub(crate) driver_get_version: Call<unsafe extern "C" fn(*mut c_int) -> Status>,
}
