//! The `TypeError` of an argument of the wrong type: a leaf, so that the
//! lowest modules (the value classes) can refuse an argument without
//! reaching up to the error conversions.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

/// The name of `obj`'s type, for an error message.
pub(crate) fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map_or_else(|_| "an object of unknown type".into(), |n| n.to_string())
}

/// The `TypeError` for an argument `obj` where `what` was expected
/// (`expected a devmm.Stream, got int`).
pub(crate) fn expected(what: &str, obj: &Bound<'_, PyAny>) -> PyErr {
    PyTypeError::new_err(format!("expected {what}, got {}", type_name(obj)))
}
