//! Platform-neutral bodies of the driver entry points. Each cdylib exports the real C symbol
//! (`cudaMalloc`, `hipMalloc`...) and forwards here with its [`Platform`](crate::Platform) and
//! the symbol's name, which is what the call log and counters record.
//!
//! Log lines read `name key=value ... -> status`: inputs first, then outputs (such as the
//! pointer or handle created); pointers and handles in hex, everything else in decimal. Calls
//! that return no status (the error-name functions) have no `-> status` suffix.
//!
//! ```
//! use fake_driver::{entry::stream, Platform};
//! // Out of strict mode, a destroyed handle is an error rather than an abort.
//! fake_driver::control::fake_set_strict(0);
//! let mut handle = std::ptr::null_mut();
//! // SAFETY: `handle` is valid for a write.
//! let status = unsafe { stream::stream_create(&Platform::EXAMPLE, "cudaStreamCreateWithFlags", &mut handle, 0) };
//! assert_eq!(status, 0);
//! assert_eq!(stream::stream_destroy(&Platform::EXAMPLE, "cudaStreamDestroy", handle), 0);
//! assert_eq!(stream::stream_destroy(&Platform::EXAMPLE, "cudaStreamDestroy", handle), 400);
//! ```

pub mod device;
pub mod error;

/// The entry point for each role of the API descriptions (`as ROLE` in `devmm/api/*.api`): the
/// fakes' build scripts generate their exported C functions from the descriptions with these
/// bodies (`devmm_codegen::fake`). Functions without a role here are written by hand.
pub const ENTRY_POINTS: &[(&str, &str)] = &[
    ("get_device_count", "device::get_device_count"),
    ("get_device", "device::get_device"),
    ("set_device", "device::set_device"),
    ("mem_get_info", "device::mem_get_info"),
    ("device_get_attribute", "device::device_get_attribute"),
    ("device_get_pci_bus_id", "device::device_get_pci_bus_id"),
    ("device_synchronize", "device::device_synchronize"),
    ("get_device_properties_v2", "device::get_device_properties"),
    ("get_device_properties", "device::get_device_properties"),
    ("mem_pool_create", "pool::mem_pool_create"),
    ("mem_pool_destroy", "pool::mem_pool_destroy"),
    ("malloc_from_pool_async", "pool::malloc_from_pool_async"),
    ("mem_pool_get_attribute", "pool::mem_pool_get_attribute"),
    ("mem_pool_set_attribute", "pool::mem_pool_set_attribute"),
    ("mem_pool_trim_to", "pool::mem_pool_trim_to"),
    ("mem_pool_set_access", "pool::mem_pool_set_access"),
    (
        "mem_pool_export_to_shareable_handle",
        "ipc::export_to_shareable_handle",
    ),
    ("mem_pool_export_pointer", "ipc::export_pointer"),
    (
        "mem_pool_import_from_shareable_handle",
        "ipc::import_from_shareable_handle",
    ),
    ("mem_pool_import_pointer", "ipc::import_pointer"),
    ("ipc_get_mem_handle", "ipc::ipc_get_mem_handle"),
    ("ipc_open_mem_handle", "ipc::ipc_open_mem_handle"),
    ("ipc_close_mem_handle", "ipc::ipc_close_mem_handle"),
    ("malloc", "memory::malloc"),
    ("free", "memory::free"),
    ("malloc_async", "memory::malloc_async"),
    ("free_async", "memory::free_async"),
    ("host_free", "memory::free_host"),
    ("malloc_managed", "memory::malloc_managed"),
    ("memcpy_async", "memory::memcpy_async"),
    ("mem_prefetch_async", "managed::prefetch"),
    ("mem_advise", "managed::advise"),
    ("stream_create_with_flags", "stream::stream_create"),
    ("stream_destroy", "stream::stream_destroy"),
    ("stream_synchronize", "stream::stream_synchronize"),
    ("stream_wait_event", "stream::stream_wait_event"),
    ("stream_is_capturing", "stream::is_capturing"),
    ("stream_get_capture_info", "stream::capture_info"),
    ("event_create_with_flags", "event::event_create"),
    ("event_record", "event::event_record"),
    ("event_destroy", "event::event_destroy"),
    ("get_last_error", "error::get_last_error"),
    ("get_error_name", "error::error_name"),
    ("get_error_string", "error::error_string"),
    ("runtime_get_version", "version::runtime_version"),
    ("driver_get_version", "version::driver_version"),
];

/// The roles every fake exports, even the minimal one (what discovery probes and errors need).
pub const PROBE_ROLES: &[&str] = &[
    "get_device_count",
    "runtime_get_version",
    "driver_get_version",
    "get_error_name",
    "get_error_string",
];

/// The roles of stream-ordered allocation, which the `-sync` fakes leave out.
pub const STREAM_ORDERED_ROLES: &[&str] = &[
    "malloc_async",
    "free_async",
    "mem_pool_create",
    "mem_pool_destroy",
    "malloc_from_pool_async",
    "mem_pool_get_attribute",
    "mem_pool_set_attribute",
    "mem_pool_trim_to",
    "mem_pool_set_access",
    "mem_pool_export_to_shareable_handle",
    "mem_pool_export_pointer",
    "mem_pool_import_from_shareable_handle",
    "mem_pool_import_pointer",
];
pub mod event;
pub mod ipc;
pub mod managed;
pub mod memory;
pub mod pool;
pub mod stream;
pub mod version;

pub use ipc::Opaque;
