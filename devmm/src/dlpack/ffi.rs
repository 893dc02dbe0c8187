//! `repr(C)` mirrors of the DLPack 1.1 C ABI (`dlpack.h`), and of the C
//! exchange API table DLPack 1.3 added (`DLPackExchangeAPI`, published as
//! a type's `__dlpack_c_exchange_api__`). The managed structs are the same
//! in 1.1 and 1.3, so devmm still stamps its exports 1.1.
//!
//! Field names follow the header so a reader can hold the two side by side.
//! Sizes, alignments and offsets are checked against the official header,
//! compiled by the C compiler, in `devmm/tests/dlpack_abi.rs`.
//!
//! ```
//! use devmm::dlpack::ffi::{DLManagedTensorVersioned, DLTensor};
//! // On 64-bit targets: data, device, ndim, dtype, shape, strides, byte_offset.
//! assert_eq!(std::mem::size_of::<DLTensor>(), 48);
//! assert_eq!(std::mem::offset_of!(DLManagedTensorVersioned, dl_tensor), 32);
//! ```

use std::ffi::{c_char, c_int, c_void};

/// The DLPack major version devmm produces.
pub const DLPACK_MAJOR_VERSION: u32 = 1;

/// The DLPack minor version devmm produces.
pub const DLPACK_MINOR_VERSION: u32 = 1;

/// The DLPack minor version of the exchange API table devmm publishes
/// ([`DLPackExchangeAPI`] appeared in 1.3); a consumer reads a table only
/// when its header says major 1 and at least this minor.
///
/// ```
/// use devmm::dlpack::ffi::{DLPACK_EXCHANGE_API_MINOR_VERSION, DLPACK_MINOR_VERSION};
/// assert!(DLPACK_EXCHANGE_API_MINOR_VERSION > DLPACK_MINOR_VERSION);
/// ```
pub const DLPACK_EXCHANGE_API_MINOR_VERSION: u32 = 3;

/// `DLManagedTensorVersioned::flags` bit: the consumer must not write.
pub const DLPACK_FLAG_BITMASK_READ_ONLY: u64 = 1 << 0;

/// `DLManagedTensorVersioned::flags` bit: the data is a copy made for the
/// consumer (devmm never sets it: exports are zero-copy).
pub const DLPACK_FLAG_BITMASK_IS_COPIED: u64 = 1 << 1;

/// `DLPackVersion`: the ABI version a versioned struct was produced for.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DLPackVersion {
    /// Major version; a consumer must not read a struct of another major.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

/// `DLDevice`: where the data lives.
///
/// `device_type` is the C enum `DLDeviceType`, an `int`-sized value; its
/// codes are [`DeviceType`](crate::DeviceType)'s discriminants.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DLDevice {
    /// `DLDeviceType` code (1 = CPU, 2 = CUDA, ...).
    pub device_type: i32,
    /// Device ordinal (0 for host memory).
    pub device_id: i32,
}

/// `DLDataType`: element type as `(code, bits, lanes)`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DLDataType {
    /// `DLDataTypeCode` (0 = int, 1 = uint, 2 = float, ...).
    pub code: u8,
    /// Bits per lane.
    pub bits: u8,
    /// Lanes per element.
    pub lanes: u16,
}

/// `DLTensor`: the plain description of a strided tensor.
#[repr(C)]
#[derive(Debug)]
pub struct DLTensor {
    /// Address of the data (devmm: the first element; null when empty).
    pub data: *mut c_void,
    /// Where `data` lives.
    pub device: DLDevice,
    /// Number of dimensions.
    pub ndim: i32,
    /// Element type.
    pub dtype: DLDataType,
    /// `ndim` extents.
    pub shape: *mut i64,
    /// `ndim` strides in elements (devmm: never null).
    pub strides: *mut i64,
    /// Bytes from `data` to the first element (devmm: always 0).
    pub byte_offset: u64,
}

/// `DLManagedTensor`: the legacy (pre-1.0) managed struct, without version
/// or flags.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensor {
    /// The tensor.
    pub dl_tensor: DLTensor,
    /// The producer's context.
    pub manager_ctx: *mut c_void,
    /// Called exactly once by the consumer when it is done; frees `self`.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// `DLManagedTensorVersioned`: the DLPack 1.x managed struct.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    /// The ABI version; checked by consumers before reading anything else.
    pub version: DLPackVersion,
    /// The producer's context.
    pub manager_ctx: *mut c_void,
    /// Called exactly once by the consumer when it is done; frees `self`.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    /// `DLPACK_FLAG_BITMASK_*` bits.
    pub flags: u64,
    /// The tensor.
    pub dl_tensor: DLTensor,
}

/// `DLPackManagedTensorAllocator`: allocates a new tensor like `prototype`
/// (its dtype, ndim, shape and device) in the producer's library. On
/// failure it calls `set_error(error_ctx, kind, message)` exactly once and
/// returns -1; the GIL may not be held.
pub type DLPackManagedTensorAllocator = unsafe extern "C" fn(
    prototype: *mut DLTensor,
    out: *mut *mut DLManagedTensorVersioned,
    error_ctx: *mut c_void,
    set_error: Option<
        unsafe extern "C" fn(error_ctx: *mut c_void, kind: *const c_char, message: *const c_char),
    >,
) -> c_int;

/// `DLPackManagedTensorFromPyObjectNoSync`: exports `py_object` (a
/// `PyObject*` of the type the table came from) as an owning managed
/// tensor, without stream synchronization. -1 with a Python error set on
/// failure (a `BufferError` where DLPack cannot describe the data).
pub type DLPackManagedTensorFromPyObjectNoSync =
    unsafe extern "C" fn(py_object: *mut c_void, out: *mut *mut DLManagedTensorVersioned) -> c_int;

/// `DLPackManagedTensorToPyObjectNoSync`: wraps an owning managed tensor
/// (ownership is taken, on failure too) in a new `PyObject*` of the
/// producer's tensor type. -1 with a Python error set on failure.
pub type DLPackManagedTensorToPyObjectNoSync = unsafe extern "C" fn(
    tensor: *mut DLManagedTensorVersioned,
    out_py_object: *mut *mut c_void,
) -> c_int;

/// `DLPackDLTensorFromPyObjectNoSync`: describes `py_object` in a caller's
/// `DLTensor`, non-owning: valid only until control returns to Python.
pub type DLPackDLTensorFromPyObjectNoSync =
    unsafe extern "C" fn(py_object: *mut c_void, out: *mut DLTensor) -> c_int;

/// `DLPackCurrentWorkStream`: the producer's current stream of a device
/// (`DLDeviceType` code, id); NULL where the device has no streams.
pub type DLPackCurrentWorkStream = unsafe extern "C" fn(
    device_type: i32,
    device_id: i32,
    out_current_stream: *mut *mut c_void,
) -> c_int;

/// `DLPackExchangeAPIHeader`: the part of the table stable across versions.
#[repr(C)]
#[derive(Debug)]
pub struct DLPackExchangeAPIHeader {
    /// The DLPack version of the table; a consumer checks the major first.
    pub version: DLPackVersion,
    /// An older table of the same producer, or null (devmm: null).
    pub prev_api: *mut DLPackExchangeAPIHeader,
}

/// `DLPackExchangeAPI`: the function table a `PyCapsule` named
/// `"dlpack_exchange_api"` points at, on the producer's type as
/// `__dlpack_c_exchange_api__`. It lives as long as the process.
///
/// ```
/// use devmm::dlpack::ffi::{DLPackExchangeAPI, DLPackExchangeAPIHeader};
/// // On 64-bit targets: the 16-byte header, then five function pointers.
/// assert_eq!(std::mem::size_of::<DLPackExchangeAPIHeader>(), 16);
/// assert_eq!(std::mem::size_of::<DLPackExchangeAPI>(), 56);
/// ```
#[repr(C)]
#[derive(Debug)]
pub struct DLPackExchangeAPI {
    /// Version and older tables.
    pub header: DLPackExchangeAPIHeader,
    /// Allocates a new tensor (required).
    pub managed_tensor_allocator: Option<DLPackManagedTensorAllocator>,
    /// Exports an object of the type (required).
    pub managed_tensor_from_py_object_no_sync: Option<DLPackManagedTensorFromPyObjectNoSync>,
    /// Wraps a managed tensor in the type (required).
    pub managed_tensor_to_py_object_no_sync: Option<DLPackManagedTensorToPyObjectNoSync>,
    /// Describes an object of the type, non-owning (optional: may be null).
    pub dltensor_from_py_object_no_sync: Option<DLPackDLTensorFromPyObjectNoSync>,
    /// The current stream of a device (required).
    pub current_work_stream: Option<DLPackCurrentWorkStream>,
}

// SAFETY: a published table is read-only plain data (a version, function
// pointers, and a pointer to another such table), read from any thread;
// nothing reachable through a shared reference is ever written.
unsafe impl Sync for DLPackExchangeAPI {}
