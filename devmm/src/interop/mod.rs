//! Rust ecosystem interop: the global allocator wrapper, and behind cargo
//! features, dlpark's owning DLPack handles (`dlpark`) and the
//! `allocator_api2` allocator trait (`allocator-api2`). cudarc lives with
//! the CUDA runtime (`runtime::cuda::interop`, feature `cudarc`).

#[cfg(feature = "allocator-api2")]
mod allocator;
#[cfg(feature = "dlpark")]
mod dlpark;
mod global_alloc;

#[cfg(feature = "allocator-api2")]
pub use allocator::HostAllocator;
pub use global_alloc::GlobalResource;
