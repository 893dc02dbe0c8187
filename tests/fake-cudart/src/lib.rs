//! A fake CUDA runtime: `libfake_cudart.so` exports the CUDA runtime API symbols devmm uses,
//! with their real C signatures and `cudaError_t` codes, over host memory (see `fake-driver`).
//!
//! Behaviour tests can rely on: 2 devices by default, each with a 1 GiB limit; a per-thread
//! current device; 256-byte aligned device allocations charged to their device
//! (`cudaErrorMemoryAllocation` past the limit, honest `cudaMemGetInfo`); streams and events
//! as distinct non-zero handles that become invalid when destroyed
//! (`cudaErrorInvalidResourceHandle`); the sentinel streams 0, `cudaStreamLegacy` (1) and
//! `cudaStreamPerThread` (2) always valid; work queued on streams runs on their worker threads (see `fake-driver`). The
//! `fake_*` control API (reset, device count, limits, failure injection, call log) comes from
//! `fake_driver::control`.
//!
//! The same sources build three libraries: `fake-cudart` (everything), `fake-cudart-sync`
//! (no `cudaMallocAsync`/`cudaFreeAsync`: the optional symbols are missing) and
//! `fake-cudart-minimal` (only the probe set: required symbols are missing).
//!
//! Every function of `devmm/api/cuda_runtime.api` with a role is generated from that description by the
//! build script (`tests/fake-driver/fake_build.rs`): the real C signature, forwarding to the
//! shared engine. The modules below hold the few calls written by hand (no role, or no shared
//! shape).

// The exported names are the CUDA runtime's.
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

/// `cudaError_t`: a C enum, so an `int`.
pub type cudaError_t = c_int;

/// The entry points generated from the API description (see the crate docs).
pub mod generated {
    include!(concat!(env!("OUT_DIR"), "/entry_points.rs"));
}
