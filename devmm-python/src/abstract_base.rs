//! Native base classes that behave as `abc.ABC` subclasses do: a Python
//! subclass that leaves an abstract method to the base cannot be
//! instantiated.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyType;
use pyo3::PyTypeInfo;

/// A `#[pyclass(subclass)]` that Python code completes by overriding
/// [`ABSTRACT`](AbstractBase::ABSTRACT). Its `#[new]` takes any arguments
/// (they belong to the subclass) and returns [`AbstractBase::new_subclass`]:
/// [`abstract_base_new`] writes it.
pub(crate) trait AbstractBase: PyTypeInfo + Sized {
    /// The methods and properties a subclass must override.
    const ABSTRACT: &'static [&'static str];
    /// What a subclass writes, for the `TypeError` (`"a Python stream
    /// overrides ..."`).
    const HINT: &'static str;

    /// The native part of a Python subclass's instance, before the subclass
    /// sets anything on it.
    fn unbound() -> Self;

    /// The native part of an instance of `cls`, or the `TypeError`
    /// `abc.ABC` raises while `cls` inherits any abstract method unchanged.
    fn new_subclass(cls: &Bound<'_, PyType>) -> PyResult<Self> {
        let base = cls.py().get_type::<Self>();
        let mut missing = Vec::new();
        for &method in Self::ABSTRACT {
            if cls.getattr(method)?.is(&base.getattr(method)?) {
                missing.push(method);
            }
        }
        if !missing.is_empty() {
            return Err(PyTypeError::new_err(format!(
                "Can't instantiate abstract class {} with abstract methods {}; {}",
                cls.name()?,
                missing.join(", "),
                Self::HINT
            )));
        }
        Ok(Self::unbound())
    }
}

/// Writes the `__new__` of an [`AbstractBase`] class in a `#[pymethods]`
/// block of its own (PyO3's `multiple-pymethods`): any arguments,
/// [`AbstractBase::new_subclass`]. The `///` lines before the type in an
/// invocation are `__new__`'s. The stub generator expands an invocation as
/// it reads the block.
macro_rules! abstract_base_new {
    ($(#[doc = $doc:literal])* $ty:ident) => {
        #[::pyo3::pymethods]
        impl $ty {
            $(#[doc = $doc])*
            #[new]
            #[classmethod]
            #[pyo3(signature = (*_args, **_kwargs))]
            fn py_new(
                cls: &::pyo3::Bound<'_, ::pyo3::types::PyType>,
                _args: &::pyo3::Bound<'_, ::pyo3::types::PyTuple>,
                _kwargs: Option<&::pyo3::Bound<'_, ::pyo3::PyAny>>,
            ) -> ::pyo3::PyResult<Self> {
                <Self as $crate::abstract_base::AbstractBase>::new_subclass(cls)
            }
        }
    };
}
pub(crate) use abstract_base_new;
