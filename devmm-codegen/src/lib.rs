//! Build-time generators for devmm.
//!
//! - Driver tables: parses the CUDA runtime and HIP API description files
//!   kept in the repository and emits typed function-table structs with a
//!   libloading-based loader, so no GPU SDK is needed to build devmm.
//! - Python stubs: reads the Python extension's Rust source and emits the
//!   `.pyi` files shipped with the package.

pub mod stubs;
