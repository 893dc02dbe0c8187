//! `repr(C)` mirrors of the DLPack 1.1 C ABI (`dlpack.h`).
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

use std::ffi::c_void;

/// The DLPack major version devmm produces.
pub const DLPACK_MAJOR_VERSION: u32 = 1;

/// The DLPack minor version devmm produces.
pub const DLPACK_MINOR_VERSION: u32 = 1;

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
