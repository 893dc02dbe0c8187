//! A fake CUDA runtime: `libfake_cudart.so` exports the CUDA runtime API symbols devmm uses,
//! with their real C signatures and `cudaError_t` codes, over host memory (see `fake-driver`).
//!
//! Behaviour tests can rely on: 2 devices by default, each with a 1 GiB limit; a per-thread
//! current device; 256-byte aligned device allocations charged to their device
//! (`cudaErrorMemoryAllocation` past the limit, honest `cudaMemGetInfo`); streams and events
//! as distinct non-zero handles that become invalid when destroyed
//! (`cudaErrorInvalidResourceHandle`); the sentinel streams 0, `cudaStreamLegacy` (1) and
//! `cudaStreamPerThread` (2) always valid; all work done synchronously at call time. The
//! `fake_*` control API (reset, device count, limits, failure injection, call log) comes from
//! `fake_driver::control`.
//!
//! The same sources build three libraries: `fake-cudart` (everything), `fake-cudart-sync`
//! (no `cudaMallocAsync`/`cudaFreeAsync`: the optional symbols are missing) and
//! `fake-cudart-minimal` (only the probe set: required symbols are missing).

// The exported names are the CUDA runtime's.
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

/// `cudaError_t`: a C enum, so an `int`.
pub type cudaError_t = c_int;
/// `cudaStream_t`: an opaque pointer (`struct CUstream_st*`).
pub type cudaStream_t = *mut c_void;
/// `cudaEvent_t`: an opaque pointer (`struct CUevent_st*`).
pub type cudaEvent_t = *mut c_void;
/// `cudaMemcpyKind`: host-to-host 0, host-to-device 1, device-to-host 2, device-to-device 3,
/// default 4.
pub type cudaMemcpyKind = c_int;
