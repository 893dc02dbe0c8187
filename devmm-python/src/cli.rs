//! The `devmm` command for Python users: the Rust CLI itself
//! (`devmm_cli::run`), reached from the package's console script and
//! `python -m devmm`.

use pyo3::prelude::*;

/// Runs the `devmm` command with `argv` (program name first, as
/// `sys.argv`) and returns its exit status. The interpreter is released
/// while it runs, so a replay's threads and other Python threads go on.
#[pyfunction]
pub(crate) fn _cli_main(py: Python<'_>, argv: Vec<String>) -> u8 {
    crate::gil::detach(py, || devmm_cli::run_status(argv))
}
