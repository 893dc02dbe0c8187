//! Shared pieces of devmm's integration tests. Include with `mod support;`.

pub(crate) mod fake_driver;
pub(crate) mod fork;
pub(crate) mod strided;
