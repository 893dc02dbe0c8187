//! A fake HIP runtime: `libfake_hip.so` exports the HIP API symbols devmm uses, with their real
//! C signatures and `hipError_t` codes, over host memory (see `fake-driver`).
//!
//! Behaviour tests can rely on: 2 devices by default, each with a 1 GiB limit; a per-thread
//! current device; 256-byte aligned device allocations charged to their device
//! (`hipErrorOutOfMemory` past the limit, honest `hipMemGetInfo`); streams and events as
//! distinct non-zero handles that become invalid when destroyed (`hipErrorInvalidHandle`); the
//! null stream 0 and `hipStreamPerThread` (2) always valid, while 1 (CUDA's legacy stream) is
//! an invalid handle here; work queued on streams runs on their worker threads (see `fake-driver`). The `fake_*` control API
//! comes from `fake_driver::control`.
//!
//! The same sources build `fake-hip` (everything) and `fake-hip-sync` (no
//! `hipMallocAsync`/`hipFreeAsync`: the optional symbols are missing).
//!
//! Every function of `devmm/api/hip.api` with a role is generated from that description by the
//! build script (`tests/fake-driver/fake_build.rs`): the real C signature, forwarding to the
//! shared engine. The modules below hold the few calls written by hand (no role, or no shared
//! shape).

// The exported names are HIP's.
#![allow(non_snake_case, non_camel_case_types)]

use std::ffi::c_int;

#[cfg(feature = "runtime")]
pub mod device;
#[cfg(feature = "runtime")]
pub mod error;
#[cfg(feature = "runtime")]
pub mod graph;
#[cfg(feature = "runtime")]
pub mod memory;
mod platform;

/// `hipError_t`: a C enum, so an `int`.
pub type hipError_t = c_int;

/// The entry points generated from the API description (see the crate docs).
pub mod generated {
    include!(concat!(env!("OUT_DIR"), "/entry_points.rs"));
}
