//! Procedural macros for devmm: `#[memory_resource]`, generated adaptors,
//! `layout!` and `#[derive(Element)]`.
//!
//! Users depend on `devmm`, which re-exports these macros; this crate is an
//! implementation detail whose version the facade pins exactly.
