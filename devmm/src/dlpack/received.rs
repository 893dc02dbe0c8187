//! A `DLManagedTensorVersioned` received from a producer, owned: its
//! fields read safely, its deleter called exactly once when it drops.

use std::ffi::c_void;
use std::fmt;
use std::ptr::NonNull;

use super::DlpackExport;
use super::ffi::{
    DLDataType, DLDevice, DLManagedTensorVersioned, DLPACK_FLAG_BITMASK_READ_ONLY, DLPackVersion,
    DLTensor,
};
use crate::{Error, Result};

/// A DLPack 1.x tensor received from a producer (another library's export,
/// or devmm's own), owned until dropped, when its deleter runs exactly once.
///
/// The fields read without `unsafe`; the data stays where the producer put
/// it (on its device) and is only exposed as an address.
///
/// ```
/// use devmm::dlpack::{DlpackRequest, ReceivedTensor};
/// use devmm::{empty, DType, EmptyOptions};
/// let t = empty(&[2, 3], DType::FLOAT32, &EmptyOptions::new())?;
/// let export = t.to_dlpack(&DlpackRequest::new().max_version(1, 1))?;
/// let received = ReceivedTensor::from_export(export)?;
/// assert_eq!(received.shape(), &[2, 3]);
/// assert_eq!(received.strides(), Some(&[3, 1][..]));
/// assert_eq!((received.dtype().code, received.dtype().bits), (2, 32));
/// assert_eq!(received.device().device_type, 1);
/// assert_eq!(received.data() as usize, t.data_ptr().addr());
/// assert!(!received.is_read_only());
/// assert_eq!(t.buffer().live_exports(), 1);
/// drop(received); // the deleter runs
/// assert_eq!(t.buffer().live_exports(), 0);
/// # Ok::<(), devmm::Error>(())
/// ```
pub struct ReceivedTensor {
    raw: NonNull<DLManagedTensorVersioned>,
}

impl ReceivedTensor {
    /// Takes ownership of a received `DLManagedTensorVersioned`.
    ///
    /// Refused with [`Error::Dlpack`] for a null pointer, a struct of
    /// another major version than 1 (read no further than its version and
    /// deleter, as DLPack asks) or a negative `ndim`; a refused non-null
    /// struct is deleted at once.
    ///
    /// # Safety
    ///
    /// `raw` is null, or points at a `DLManagedTensorVersioned` this call
    /// is given: nobody else calls its deleter, and until the deleter runs
    /// the struct, and for a 1.x struct its `shape` (`ndim` values) and
    /// `strides` (null or `ndim` values), stay valid and unchanged.
    pub unsafe fn from_raw(raw: *mut DLManagedTensorVersioned) -> Result<ReceivedTensor> {
        let Some(raw) = NonNull::new(raw) else {
            return Err(refused("the DLManagedTensorVersioned pointer is null"));
        };
        // Owned from here: an early return deletes it.
        let received = ReceivedTensor { raw };
        let version = received.version();
        if version.major != 1 {
            return Err(refused(&format!(
                "the tensor is DLPack {}.{}, whose layout this consumer cannot read; ask the \
                 producer for DLPack 1.x (max_version=(1, 1))",
                version.major, version.minor
            )));
        }
        if received.dl_tensor().ndim < 0 {
            return Err(refused(&format!(
                "the tensor has ndim={}, not a number of dimensions",
                received.dl_tensor().ndim
            )));
        }
        Ok(received)
    }

    /// Takes a devmm export, which must be versioned
    /// ([`DlpackRequest::max_version`](super::DlpackRequest::max_version) of
    /// 1.0 or newer); a legacy one is refused with [`Error::Dlpack`] (and
    /// deleted).
    pub fn from_export(export: DlpackExport) -> Result<ReceivedTensor> {
        if export.version().is_none() {
            return Err(refused(
                "a legacy (pre-1.0) export is not a DLManagedTensorVersioned; export with \
                 DlpackRequest::new().max_version(1, 1)",
            ));
        }
        // SAFETY: a versioned export's pointer is a live
        // `DLManagedTensorVersioned`; `into_raw` hands over its deleter,
        // and devmm keeps shape and strides in the block until it runs.
        unsafe { ReceivedTensor::from_raw(export.into_raw().cast()) }
    }

    fn managed(&self) -> &DLManagedTensorVersioned {
        // SAFETY: `raw` is live and unchanged until the drop (from_raw's contract).
        unsafe { self.raw.as_ref() }
    }

    /// The DLPack version the producer stamped.
    pub fn version(&self) -> DLPackVersion {
        self.managed().version
    }

    /// The `DLPACK_FLAG_BITMASK_*` bits.
    pub fn flags(&self) -> u64 {
        self.managed().flags
    }

    /// Whether the producer marked the data read-only.
    pub fn is_read_only(&self) -> bool {
        self.flags() & DLPACK_FLAG_BITMASK_READ_ONLY != 0
    }

    /// The whole `DLTensor`, read-only.
    pub fn dl_tensor(&self) -> &DLTensor {
        &self.managed().dl_tensor
    }

    /// The data's address as the producer gave it (add
    /// [`byte_offset`](Self::byte_offset) for the first element); memory on
    /// [`device`](Self::device), not necessarily readable from the host.
    pub fn data(&self) -> *const c_void {
        self.dl_tensor().data.cast_const()
    }

    /// Bytes from [`data`](Self::data) to the first element.
    pub fn byte_offset(&self) -> u64 {
        self.dl_tensor().byte_offset
    }

    /// Where the data lives.
    pub fn device(&self) -> DLDevice {
        self.dl_tensor().device
    }

    /// The element type.
    pub fn dtype(&self) -> DLDataType {
        self.dl_tensor().dtype
    }

    /// The extents, `ndim` of them.
    pub fn shape(&self) -> &[i64] {
        self.dims(self.dl_tensor().shape).unwrap_or(&[])
    }

    /// The strides in elements; `None` when the producer left them out,
    /// which DLPack defines as compact row-major.
    pub fn strides(&self) -> Option<&[i64]> {
        self.dims(self.dl_tensor().strides)
    }

    fn dims(&self, start: *mut i64) -> Option<&[i64]> {
        // `from_raw` refused a negative `ndim`.
        let ndim = usize::try_from(self.dl_tensor().ndim).unwrap_or(0);
        match (NonNull::new(start), ndim) {
            (_, 0) => Some(&[]),
            (None, _) => None,
            // SAFETY: `ndim` values, valid until the drop (from_raw's contract).
            (Some(start), _) => Some(unsafe { std::slice::from_raw_parts(start.as_ptr(), ndim) }),
        }
    }
}

fn refused(reason: &str) -> Error {
    Error::Dlpack {
        reason: format!("cannot take the DLPack tensor: {reason}"),
    }
}

impl Drop for ReceivedTensor {
    fn drop(&mut self) {
        if let Some(deleter) = self.managed().deleter {
            // SAFETY: this owner calls the deleter once, here, on its own struct.
            unsafe { deleter(self.raw.as_ptr()) };
        }
    }
}

impl fmt::Debug for ReceivedTensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReceivedTensor")
            .field("version", &self.version())
            .field("flags", &self.flags())
            .field("data", &self.data())
            .field("device", &self.device())
            .field("dtype", &self.dtype())
            .field("shape", &self.shape())
            .field("strides", &self.strides())
            .finish()
    }
}
