//! Integer arguments that count something (bytes, elements, an alignment,
//! a handle): a negative or oversized value is a `ValueError` that names
//! the argument, as the seed's API raises it, never the bare
//! `OverflowError` a plain `usize` conversion gives.

use std::marker::PhantomData;

use std::fmt;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyInt, PyTuple};

/// The Python name of the argument a [`Count`] stands for.
pub(crate) trait ArgName {
    /// As the Python signature spells it.
    const NAME: &'static str;
    /// Whether a value that is no int is a `ValueError` too, where the
    /// seed's rule for the argument says so, rather than the conversion's
    /// `TypeError`.
    const ONLY_VALUE_ERRORS: bool = false;
    /// Whether the argument is an alignment, which must be a power of two:
    /// a negative or huge int is refused saying so, as a zero or odd one is.
    const POWER_OF_TWO: bool = false;
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
        let rule = "must be a non-negative integer";
        match count(&obj, rule, N::NAME) {
            Ok(value) => Ok(Count::of(value)),
            Err(err) if N::ONLY_VALUE_ERRORS && err.is_instance_of::<PyTypeError>(obj.py()) => {
                Err(not_a_count(N::NAME, rule, 0, &obj.repr()?))
            }
            Err(err) if N::POWER_OF_TWO && err.is_instance_of::<PyValueError>(obj.py()) => {
                Err(PyValueError::new_err(format!(
                    "{} must be a power of two, not {}",
                    N::NAME,
                    obj.repr()?
                )))
            }
            Err(err) => Err(err),
        }
    }
}

/// A per-dimension argument named `N::NAME` (a shape, strides): a
/// sequence of non-negative ints, or one int for 1-D. An entry that is no
/// int is a `ValueError` too, as the seed's shape check raises it.
///
/// Python type: `Sequence[int] | int`
#[derive(Clone, Debug)]
pub(crate) struct Dims<N>(pub(crate) devmm::Dims, PhantomData<N>);

impl<'py, N: ArgName> FromPyObject<'_, 'py> for Dims<N> {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        let entry = |item: &Bound<'_, PyAny>| dim(item, N::NAME);
        // A tuple (what shapes nearly always are) is read in place: no
        // iterator object, no reference counting per item.
        let dims = if let Ok(tuple) = obj.cast::<PyTuple>() {
            let mut dims = devmm::Dims::with_capacity(tuple.len());
            for item in tuple.iter_borrowed() {
                dims.push(entry(&item)?);
            }
            dims
        } else if obj.cast::<PyInt>().is_ok() {
            devmm::Dims::from_elem(entry(&obj)?, 1)
        } else {
            obj.try_iter()?
                .map(|item| entry(&item?))
                .collect::<PyResult<_>>()?
        };
        Ok(Dims(dims, PhantomData))
    }
}

/// `nbytes` checked as `allocate` and `deallocate` check it, for the
/// resources written in Python (`devmm.mrs.cuda`'s rmm and CuPy ones),
/// which are called before any conversion of devmm's runs.
#[pyfunction]
pub(crate) fn _check_nbytes(nbytes: Count<Nbytes>) -> usize {
    nbytes.get()
}

/// A positive integer argument named `N::NAME` that the seed checks by
/// value (`Layout.validate`'s `itemsize`): 0, or a value that is no int,
/// is a `ValueError` too, as with [`Dims`]' entries.
///
/// Python type: `int`
#[derive(Debug)]
pub(crate) struct ValueCount<N>(usize, PhantomData<N>);

impl<N> ValueCount<N> {
    /// The count.
    pub(crate) const fn get(&self) -> usize {
        self.0
    }
}

impl<'py, N: ArgName> FromPyObject<'_, 'py> for ValueCount<N> {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        value_count(&obj, "must be a positive integer", N::NAME, 1)
            .map(|n| ValueCount(n, PhantomData))
    }
}

/// One entry of the per-dimension argument `name`.
fn dim(item: &Bound<'_, PyAny>, name: &str) -> PyResult<usize> {
    // The seed's words: a shape's entries are its extents.
    let rule = if name == "shape" {
        "extents must be non-negative ints"
    } else {
        "must list non-negative ints"
    };
    value_count(item, rule, name, 0)
}

/// `count`, from `min` (0 or 1), with a value that is no int a
/// `ValueError` as well, caused by the conversion's `TypeError`. Any other
/// exception the conversion raises (a `KeyboardInterrupt` in `__index__`)
/// propagates unchanged.
fn value_count(obj: &Bound<'_, PyAny>, rule: &str, name: &str, min: usize) -> PyResult<usize> {
    let py = obj.py();
    let cause = match count(obj, rule, name) {
        Ok(value) if value >= min => return Ok(value),
        Ok(_) => None,
        Err(err) if err.is_instance_of::<PyTypeError>(py) => Some(err),
        // Negative or huge: `count`'s own error, said from 0, is said
        // again from `min`.
        Err(err) if min > 0 && err.is_instance_of::<PyValueError>(py) => None,
        Err(err) => return Err(err),
    };
    let shown = obj.repr().map(|r| r.to_string()).unwrap_or_default();
    let err = not_a_count(name, rule, min, &shown);
    err.set_cause(py, cause);
    Err(err)
}

/// `obj` as a `usize`, or the `ValueError` saying `name {rule} from 0 to
/// usize::MAX`.
fn count(obj: &Bound<'_, PyAny>, rule: &str, name: &str) -> PyResult<usize> {
    // The common case, an int that fits, in one C call; anything else
    // (a negative or huge int, a non-int) goes the exact way below, which
    // names the value or raises the conversion's own `TypeError`.
    if let Ok(value) = obj.extract::<usize>() {
        return Ok(value);
    }
    let value: i128 = obj.extract()?;
    usize::try_from(value).map_err(|_| not_a_count(name, rule, 0, &value))
}

/// The `ValueError` for a count argument `name` that is not a `usize` from
/// `min`: `rule` says what it must be, `shown` is the value given, as
/// Python spells it. Built directly, not through `to_py_err`: no core call
/// ran, so there is no deferred interrupt to take.
fn not_a_count(name: &str, rule: &str, min: usize, shown: &dyn fmt::Display) -> PyErr {
    PyValueError::new_err(format!(
        "{name} {rule} from {min} to {}, not {shown}",
        usize::MAX
    ))
}

/// Declares argument names for [`Count`].
macro_rules! arg_names {
    ($($(#[$doc:meta])* $ty:ident = $name:literal $(, $flag:ident)?;)*) => {$(
        $(#[$doc])*
        #[derive(Debug)]
        pub(crate) struct $ty;

        impl ArgName for $ty {
            const NAME: &'static str = $name;
            $(const $flag: bool = true;)?
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
    /// A pool's size reserved at once.
    InitialPoolSize = "initial_pool_size";
    /// A pool's release threshold.
    ReleaseThreshold = "release_threshold";
    /// A pool's maximum size.
    MaxPoolSize = "max_pool_size";
    /// What `trim` keeps reserved.
    KeepBytes = "keep_bytes";
    /// A resource's promised alignment.
    Alignment = "alignment", POWER_OF_TWO;
    /// `RecordingMemoryResource`'s promised alignment.
    GuaranteedAlignment = "guaranteed_alignment", POWER_OF_TWO;
    /// `Aligned`'s row padding.
    UnitStrideAlignment = "unit_stride_alignment";
    /// A layout's base alignment.
    BaseAlignment = "base_alignment", POWER_OF_TWO;
    /// An element size.
    Itemsize = "itemsize";
    /// A native stream handle.
    Handle = "handle";
    /// A tensor's offset, in elements: anything but a non-negative int is
    /// the seed's `ValueError`.
    Offset = "offset", ONLY_VALUE_ERRORS;
    /// `make_stream_wait`'s native consumer stream.
    ConsumerHandle = "consumer_handle";
    /// A raw copy's device address (`copy_host_to_ptr`, `copy_ptr_to_host`).
    Db = "db";
    /// `copy_device_to_ptr`'s source address.
    DSrc = "d_src";
    /// `copy_device_to_ptr`'s destination address.
    DDst = "d_dst";
    /// `DeviceRuntime.memcpy`'s destination address.
    Dst = "dst";
    /// `DeviceRuntime.memcpy`'s source address.
    Src = "src";
    /// `copy_device_to_ptr`'s byte count.
    CopyCount = "count";
    /// A shape's extents.
    Shape = "shape";
    /// A layout's strides, in elements.
    Strides = "strides";
    /// `Permuted`'s dimension order.
    Permutation = "permutation";
}
