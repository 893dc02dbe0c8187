//! DLPack 1.1 export and import, and the rules of DLPack 1.3's C exchange
//! API ([`allocate_like`], [`current_work_stream`]): every [`Tensor`](crate::Tensor) is a
//! zero-copy producer, and [`Tensor::from_dlpack`](crate::Tensor::from_dlpack)
//! takes any producer's managed tensor (either struct version).
//!
//! [`Tensor::to_dlpack`](crate::Tensor::to_dlpack) answers a
//! [`DlpackRequest`] (the arguments of `__dlpack__`) with a [`DlpackExport`]:
//! an owned handle over one heap block holding the managed struct, its shape
//! and its strides. The consumer takes the raw pointer and calls the deleter
//! once, from any thread; until then the tensor's buffer and its resource
//! chain stay alive, even if the buffer is freed meanwhile.
//!
//! ```
//! use devmm::dlpack::{ffi, DlpackRequest};
//! use devmm::{empty, DType, EmptyOptions};
//! let t = empty(&[3], DType::INT32, &EmptyOptions::new())?;
//! let raw = t.to_dlpack(&DlpackRequest::new().max_version(1, 1))?.into_raw();
//! let managed = raw.cast::<ffi::DLManagedTensorVersioned>();
//! // SAFETY: a versioned export from `into_raw`, deleted exactly once below.
//! unsafe {
//!     assert_eq!((*managed).dl_tensor.ndim, 1);
//!     ((*managed).deleter.unwrap())(managed);
//! }
//! assert_eq!(t.buffer().live_exports(), 0);
//! # Ok::<(), devmm::Error>(())
//! ```

mod exchange;
mod export;
pub mod ffi;
mod import;
mod received;
mod request;

pub use exchange::{allocate_like, current_work_stream};
pub use export::{DlpackExport, ExportOwner};
pub use import::consumer_stream_value;
pub use received::ReceivedTensor;
pub use request::{DlpackFlavor, DlpackRequest};
