//! Native base classes that behave as `abc.ABC` subclasses do: a Python
//! subclass that leaves an abstract method to the base cannot be
//! instantiated.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyType;

/// Refuses to instantiate `cls` while it inherits any of `methods` from
/// `base` unchanged (`TypeError`, worded as `abc.ABC`'s, then `hint`).
pub(crate) fn require_overrides(
    cls: &Bound<'_, PyType>,
    base: &Bound<'_, PyType>,
    methods: &[&str],
    hint: &str,
) -> PyResult<()> {
    let mut missing = Vec::new();
    for &method in methods {
        if cls.getattr(method)?.is(&base.getattr(method)?) {
            missing.push(method);
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(PyTypeError::new_err(format!(
        "Can't instantiate abstract class {} with abstract methods {}; {hint}",
        cls.name()?,
        missing.join(", ")
    )))
}
