//! Ecosystem interop: the global allocator wrapper, Python's buffer
//! protocol view of a tensor, NumPy's NEP 49 handler
//! over a resource, the routes PyTorch's pluggable allocator is served from
//! (and the `std::bad_alloc` its hook fails with), and behind cargo
//! features, dlpark's owning DLPack handles (`dlpark`) and the
//! `allocator_api2` allocator trait (`allocator-api2`). cudarc lives with
//! the CUDA runtime (`runtime::cuda::interop`, feature `cudarc`).

#[cfg(feature = "allocator-api2")]
mod allocator;
mod buffer_view;
mod cxx_exception;
#[cfg(feature = "dlpark")]
mod dlpark;
mod global_alloc;
mod nep49;
mod torch;

#[cfg(feature = "allocator-api2")]
pub use allocator::HostAllocator;
pub use buffer_view::BufferView;
#[doc(hidden)]
pub use cxx_exception::throw_bad_alloc;
pub use global_alloc::GlobalResource;
pub use nep49::{CallScope, DataMemAllocator, DataMemHandler, Nep49Handler, Nep49Resource};
pub use torch::{TorchRoutes, TorchStatistics};
