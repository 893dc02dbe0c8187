//! The `devmm` Python package's native core (`devmm._devmm`).
//!
//! A PyO3 extension over the Rust core, so Python users get the seed's API
//! with the Rust implementation's speed and safety.

use pyo3::prelude::*;

/// The extension module.
#[pymodule]
fn _devmm(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
