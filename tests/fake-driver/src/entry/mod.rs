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
pub mod event;
pub mod memory;
pub mod stream;
pub mod version;
