//! A fake HIP runtime: `libfake_hip.so` exports the HIP API symbols devmm uses, with their real
//! C signatures and `hipError_t` codes, over host memory (see `fake-driver`).
//!
//! Behaviour tests can rely on: 2 devices by default, each with a 1 GiB limit; a per-thread
//! current device; 256-byte aligned device allocations charged to their device
//! (`hipErrorOutOfMemory` past the limit, honest `hipMemGetInfo`); streams and events as
//! distinct non-zero handles that become invalid when destroyed (`hipErrorInvalidHandle`); the
//! null stream 0 and `hipStreamPerThread` (2) always valid, while 1 (CUDA's legacy stream) is
//! an invalid handle here; all work done synchronously at call time. The `fake_*` control API
//! comes from `fake_driver::control`.
//!
//! The same sources build `fake-hip` (everything) and `fake-hip-sync` (no
//! `hipMallocAsync`/`hipFreeAsync`: the optional symbols are missing).

// The exported names are HIP's.
#![allow(non_snake_case, non_camel_case_types)]

use std::ffi::{c_int, c_void};

pub mod device;
pub mod error;
#[cfg(feature = "runtime")]
pub mod event;
#[cfg(feature = "runtime")]
pub mod memory;
mod platform;
#[cfg(feature = "runtime")]
pub mod stream;
pub mod version;

/// `hipError_t`: a C enum, so an `int`.
pub type hipError_t = c_int;
/// `hipStream_t`: an opaque pointer (`struct ihipStream_t*`).
pub type hipStream_t = *mut c_void;
/// `hipEvent_t`: an opaque pointer (`struct ihipEvent_t*`).
pub type hipEvent_t = *mut c_void;
/// `hipMemcpyKind`: host-to-host 0, host-to-device 1, device-to-host 2, device-to-device 3,
/// default 4.
pub type hipMemcpyKind = c_int;
