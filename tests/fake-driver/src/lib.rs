//! The engine behind the fake driver libraries (`libfake_cudart.so`, `libfake_hip.so`).
//!
//! The fakes let devmm's CUDA and ROCm runtimes be tested on machines without a GPU, through the
//! real generated loader: each cdylib exports the platform's C symbols with their real signatures
//! and status codes, and forwards every call to the platform-neutral entry points in [`entry`].
//! Memory is host memory, devices are bookkeeping (count, per-device limits, a per-thread current
//! device), streams and events are opaque handles, and every call is counted and logged so tests
//! can assert what the code under test asked the driver to do, in which order.
//!
//! Every cdylib that links this crate also exports the `fake_*` control API ([`control`]); each
//! library has its own state, so the CUDA and HIP fakes never see each other's calls.
//!
//! ```
//! use fake_driver::entry::device;
//! # use fake_driver::Platform;
//! # static PLATFORM: Platform = Platform::EXAMPLE;
//! let mut count = 0;
//! // SAFETY: `count` is valid for a write.
//! let status = unsafe { device::get_device_count(&PLATFORM, "cudaGetDeviceCount", &mut count) };
//! assert_eq!((status, count), (0, 2));
//! ```

mod call;
pub mod control;
mod device;
pub mod entry;
mod event;
mod handle;
mod inject;
mod log;
mod memory;
mod out;
mod platform;
mod state;
mod stream;

pub use platform::{Codes, ErrorInfo, Fault, Platform};
