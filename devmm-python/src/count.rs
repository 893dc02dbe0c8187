//! Integer arguments that count something (bytes, elements, an alignment,
//! a handle): a negative or oversized value is a `ValueError` that names
//! the argument, as the seed's API raises it, never the bare
//! `OverflowError` a plain `usize` conversion gives.

use std::marker::PhantomData;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// The Python name of the argument a [`Count`] stands for.
pub(crate) trait ArgName {
    /// As the Python signature spells it.
    const NAME: &'static str;
}

/// A non-negative integer argument named `N::NAME` in its errors.
///
/// Python type: `int`
#[derive(Debug)]
pub(crate) struct Count<N>(usize, PhantomData<N>);

impl<N> Count<N> {
    /// A default value for a signature.
    pub(crate) const fn of(value: usize) -> Self {
        Count(value, PhantomData)
    }

    /// The count.
    pub(crate) const fn get(&self) -> usize {
        self.0
    }
}

impl<'py, N: ArgName> FromPyObject<'_, 'py> for Count<N> {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        let value: i128 = obj.extract()?;
        usize::try_from(value).map(Count::of).map_err(|_| {
            PyValueError::new_err(format!(
                "{} must be an integer from 0 to {}, not {value}",
                N::NAME,
                usize::MAX
            ))
        })
    }
}

/// Declares argument names for [`Count`].
macro_rules! arg_names {
    ($($(#[$doc:meta])* $ty:ident = $name:literal;)*) => {$(
        $(#[$doc])*
        #[derive(Debug)]
        pub(crate) struct $ty;

        impl ArgName for $ty {
            const NAME: &'static str = $name;
        }
    )*};
}

arg_names! {
    /// `allocate`'s and `deallocate`'s size.
    Nbytes = "nbytes";
    /// `DeviceBuffer`'s size.
    Size = "size";
    /// `LimitingAdaptor`'s limit.
    LimitBytes = "limit_bytes";
    /// A resource's promised alignment.
    Alignment = "alignment";
    /// `RecordingMemoryResource`'s promised alignment.
    GuaranteedAlignment = "guaranteed_alignment";
    /// `Aligned`'s row padding.
    UnitStrideAlignment = "unit_stride_alignment";
    /// A layout's base alignment.
    BaseAlignment = "base_alignment";
    /// An element size.
    Itemsize = "itemsize";
    /// A tensor's offset, in elements.
    Offset = "offset";
    /// A native stream handle.
    Handle = "handle";
}
