//! Records handed to Python as the frozen dataclasses the package's Python
//! modules define (`devmm.statistics.Statistics`, `devmm.LiveAllocation`):
//! the core fills in the fields, Python owns the class, so equality,
//! hashing, `repr` and `dataclasses.asdict` are Python's own.

use pyo3::call::PyCallArgs;
use pyo3::prelude::*;

/// The class `name` of the package's Python module `module`.
pub(crate) fn class<'py>(py: Python<'py>, module: &str, name: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import(module)?.getattr(name)
}

/// A new `module.name` made of `fields`, in the order the class declares them.
pub(crate) fn make<'py>(
    py: Python<'py>,
    module: &str,
    name: &str,
    fields: impl PyCallArgs<'py>,
) -> PyResult<Bound<'py, PyAny>> {
    class(py, module, name)?.call1(fields)
}
