//! What Python's buffer protocol (`Py_buffer`) says about a tensor on
//! host memory, computed once here: a binding copies the fields into the
//! view it was handed and keeps the [`BufferView`] until the view is
//! released.

use std::ffi::{CString, c_void};

use crate::array_interface::ArrayInterfaceKind;
use crate::dlpack::{DlpackExport, DlpackRequest};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// A tensor's memory described for the buffer protocol, holding a DLPack
/// export so that a `free()` waits for the consumer.
///
/// ```
/// use devmm::{empty, DType, EmptyOptions};
/// use devmm::interop::BufferView;
/// let t = empty(&[2, 3], DType::INT16, &EmptyOptions::new())?;
/// let view = BufferView::new(&t, true, false)?;
/// assert_eq!((view.len, view.itemsize, view.readonly), (12, 2, false));
/// assert_eq!((view.shape.as_slice(), view.strides.as_slice()), (&[2, 3][..], &[6, 2][..]));
/// assert_eq!(view.format.to_str().unwrap(), "h");
/// assert_eq!(t.buffer().live_exports(), 1);
/// drop(view);
/// assert_eq!(t.buffer().live_exports(), 0);
/// # Ok::<(), devmm::Error>(())
/// ```
#[derive(Debug)]
pub struct BufferView {
    _export: DlpackExport,
    /// The first byte (a static byte for an empty tensor: never NULL).
    pub buf: *mut c_void,
    /// Bytes spanned by the elements.
    pub len: isize,
    /// Whether the consumer may only read.
    pub readonly: bool,
    /// Bytes per element.
    pub itemsize: isize,
    /// The `struct` format of an element.
    pub format: CString,
    /// Extents.
    pub shape: Vec<isize>,
    /// Strides in bytes.
    pub strides: Vec<isize>,
}

// SAFETY: the raw pointer is the exported memory's address, only read.
unsafe impl Send for BufferView {}
// SAFETY: as for Send.
unsafe impl Sync for BufferView {}

fn refused(reason: impl Into<String>) -> Error {
    Error::Dlpack {
        reason: reason.into(),
    }
}

impl BufferView {
    /// The view of `tensor` for a consumer that asks for a `writable`
    /// buffer and does or does not accept `strides`. Refused (`Dlpack`,
    /// Python: `BufferError`) for memory the host cannot read, a writable
    /// request on a read-only tensor, and a strided tensor for a consumer
    /// without strides.
    pub fn new(tensor: &Tensor, writable: bool, strides: bool) -> Result<BufferView> {
        let ai = tensor.array_interface(ArrayInterfaceKind::Host)?;
        if writable && ai.data.1 {
            return Err(refused(
                "the tensor is read-only; ask for a read-only buffer (bytes(), memoryview().tobytes())",
            ));
        }
        if !strides && ai.strides.is_some() {
            return Err(refused(format!(
                "the tensor is not C-contiguous (strides {:?}); the consumer must accept strides",
                tensor.strides()
            )));
        }
        let export = tensor.to_dlpack(&DlpackRequest::new().max_version(1, 1))?;
        let itemsize = tensor.dtype().itemsize();
        let ssize =
            |v: usize| isize::try_from(v).map_err(|_| refused("extent overflows Py_ssize_t"));
        let bytes = |elements: usize| {
            elements
                .checked_mul(itemsize)
                .ok_or_else(|| refused("extent in bytes overflows usize"))
                .and_then(ssize)
        };
        // An empty view still needs a non-NULL address.
        static EMPTY: u8 = 0;
        Ok(BufferView {
            _export: export,
            buf: if ai.data.0 == 0 {
                std::ptr::addr_of!(EMPTY).cast_mut().cast()
            } else {
                ai.data.0 as *mut c_void
            },
            len: bytes(tensor.numel())?,
            readonly: ai.data.1,
            itemsize: ssize(itemsize)?,
            format: CString::new(ai.buffer_format()).map_err(|e| refused(e.to_string()))?,
            shape: tensor
                .shape()
                .iter()
                .map(|&d| ssize(d))
                .collect::<Result<_>>()?,
            strides: tensor
                .strides()
                .iter()
                .map(|&s| bytes(s))
                .collect::<Result<_>>()?,
        })
    }
}
