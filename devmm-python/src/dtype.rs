//! `DType`: DLPack's `(code, bits, lanes)` element types. `DType` is a
//! dataclass defined in Python (`devmm._core.dtypes`) over the functions
//! here; `DTypeArg` reads every spelling of a dtype.

use std::sync::Mutex;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyType};

use crate::error::IntoPyResult;
use crate::value_class::{IntField, ValueClass};

/// A core dtype as Python's `devmm.DType`, a frozen dataclass defined in
/// `devmm._core.dtypes` whose checks, names and sizes are the functions
/// below.
///
/// Python class: `devmm._core.dtypes.DType`
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PyDType(pub(crate) devmm::DType);

static DTYPE: ValueClass<devmm::DType> = ValueClass::new("devmm._core.dtypes", "DType");

impl From<devmm::DType> for PyDType {
    fn from(dtype: devmm::DType) -> Self {
        PyDType(dtype)
    }
}

impl PyDType {
    /// The dtype a `devmm.DType` holds, or `None` for any other object.
    fn read(obj: &Bound<'_, PyAny>) -> PyResult<Option<devmm::DType>> {
        if !DTYPE.holds(obj)? {
            return Ok(None);
        }
        // The fields were checked at construction, so they fit their types
        // (and a narrow int reads faster than an `i128`).
        let py = obj.py();
        let code: u8 = obj.getattr(intern!(py, "code"))?.extract()?;
        let bits: u8 = obj.getattr(intern!(py, "bits"))?.extract()?;
        let lanes: u16 = obj.getattr(intern!(py, "lanes"))?.extract()?;
        devmm::DType::from_fields(code.into(), bits.into(), lanes.into())
            .py()
            .map(Some)
    }
}

impl<'py> IntoPyObject<'py> for PyDType {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    /// The one `devmm.DType` of this value.
    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let PyDType(dtype) = self;
        DTYPE.instance(py, dtype, || dtype.fields())
    }
}

/// `DType.__post_init__`: the fields, checked.
#[pyfunction]
pub(crate) fn _check_dtype(
    code: IntField,
    bits: IntField,
    lanes: IntField,
) -> PyResult<(u8, u8, u16)> {
    devmm::DType::from_fields(code.0, bits.0, lanes.0)
        .py()
        .map(devmm::DType::fields)
}

/// `DType.from_string`: the fields of the dtype a standard name names. A
/// name that is no `str` is a `ValueError`, as an unknown name is (the
/// seed looks any object up among the names).
#[pyfunction]
pub(crate) fn _parse_dtype(name: &Bound<'_, PyAny>) -> PyResult<(u8, u8, u16)> {
    let text = name.cast::<PyString>().map_err(|_| {
        let got = name.repr().map(|r| r.to_string()).unwrap_or_default();
        PyValueError::new_err(format!(
            "DType.from_string takes a dtype name (a str such as \"float32\"), got {got}; \
             DType.from_any reads the other spellings of a dtype"
        ))
    })?;
    Ok(text.to_str()?.parse::<devmm::DType>().py()?.fields())
}

/// `DType.from_any`: the dtype any spelling of one names.
#[pyfunction]
pub(crate) fn _dtype_from_any(obj: DTypeArg) -> PyDType {
    PyDType(obj.0)
}

/// `DType.itemsize`: bytes per element, rounded up for sub-byte types.
#[pyfunction]
pub(crate) fn _dtype_itemsize(dtype: DTypeArg) -> usize {
    dtype.0.itemsize()
}

/// `DType.name` and `str(dtype)`: the standard name, or a `Float32x4`-style
/// spelling for vector types.
#[pyfunction]
pub(crate) fn _dtype_name(dtype: DTypeArg) -> String {
    dtype.0.to_string()
}

/// An element-type argument: whatever `DType.from_any` takes.
///
/// Python type: `DType | str | type[Any] | numpy.dtype[Any] | _NumpyLikeDType | _TorchDType`
/// Python protocol: `_NumpyLikeDType(kind: str, itemsize: int)` Any object that describes a dtype as NumPy's do, by its kind character (`"f"`) and item size in bytes.
/// Python protocol: `_TorchDType(itemsize: int, is_floating_point: bool, is_complex: bool, is_signed: bool)` A `torch.dtype` (`torch.float32`), named by its attributes so the stubs do not depend on torch (at run time only a real `torch.dtype` is read); `ml_dtypes` types are NumPy scalar types.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DTypeArg(pub(crate) devmm::DType);

impl<'py> FromPyObject<'_, 'py> for DTypeArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        let obj = obj.to_owned();
        if let Some(dtype) = SPELLINGS.get(&obj) {
            return Ok(DTypeArg(dtype));
        }
        if let Ok(name) = obj.cast::<PyString>() {
            return match name.to_str()?.parse() {
                Ok(dtype) => {
                    if name.is_exact_instance_of::<PyString>() {
                        SPELLINGS.put(&obj, dtype);
                    }
                    Ok(DTypeArg(dtype))
                }
                // NumPy type codes: those of the standard dtypes ("f4",
                // "<i8") read by the core, any other when NumPy is there
                // to read it.
                Err(err) => match devmm::DType::from_type_code(name.to_str()?) {
                    Some(dtype) => Ok(DTypeArg(dtype)),
                    None => {
                        numpy_dtype(&obj)?.map_or(Err(err).py(), |np| from_numpy(&np).map(DTypeArg))
                    }
                },
            };
        }
        if let Some(dtype) = PyDType::read(&obj)? {
            if obj.get_type().is(DTYPE.class(obj.py())?) {
                SPELLINGS.put(&obj, dtype);
            }
            return Ok(DTypeArg(dtype));
        }
        if let Some(dtype) = numpy_like(&obj)? {
            return Ok(DTypeArg(dtype));
        }
        if let Some(dtype) = torch_dtype(&obj)? {
            return Ok(DTypeArg(dtype));
        }
        // Scalar types: np.float32, ml_dtypes.bfloat16.
        if obj.is_instance_of::<PyType>() {
            if let Some(np) = numpy_dtype(&obj)? {
                return from_numpy(&np).map(DTypeArg);
            }
        }
        Err(PyTypeError::new_err(format!(
            "cannot interpret {} as a dtype: pass a devmm.DType, a name such as \"float32\", \
             a NumPy dtype, scalar type or type code, an object with NumPy's kind and \
             itemsize, or a torch/ml_dtypes dtype",
            obj.repr()?
        )))
    }
}

/// The dtype spellings read last, by object: a program spells its dtypes
/// with a few string literals or `DType` constants, so the same objects come
/// back call after call and are recognised by identity instead of read
/// again. The cache holds each object, so an address cannot be reused by
/// another; it takes plain `str`s and exact `devmm.DType`s only, whose
/// release runs no Python code and which do not change (a frozen
/// dataclass).
struct SpellingCache(Mutex<[Option<CachedSpelling>; SpellingCache::SLOTS]>);

/// A spelling's object and the dtype it reads as.
type CachedSpelling = (Py<PyAny>, devmm::DType);

static SPELLINGS: SpellingCache = SpellingCache(Mutex::new([const { None }; SpellingCache::SLOTS]));

impl SpellingCache {
    const SLOTS: usize = 4;

    fn get(&self, obj: &Bound<'_, PyAny>) -> Option<devmm::DType> {
        let slots = self.0.lock().unwrap_or_else(|e| e.into_inner());
        slots
            .iter()
            .flatten()
            .find(|(cached, _)| cached.is(obj))
            .map(|(_, dtype)| *dtype)
    }

    /// Remembers `obj` (a plain `str` or an exact `devmm.DType`, which the
    /// caller checked), pushing out the oldest entry.
    fn put(&self, obj: &Bound<'_, PyAny>, dtype: devmm::DType) {
        let evicted = {
            let mut slots = self.0.lock().unwrap_or_else(|e| e.into_inner());
            slots.rotate_right(1);
            slots[0].replace((obj.clone().unbind(), dtype))
        };
        // Released outside the lock, while attached: a plain decref.
        drop(evicted);
    }
}

/// The dtype an object describes as a NumPy dtype does: NumPy's own by
/// its type string and name (`from_numpy`), any other by its `kind`
/// character and `itemsize` alone, as the seed duck-types dtypes; `None`
/// for an object without `kind` and `itemsize`, or a class (NumPy's scalar
/// types have them as descriptors).
fn numpy_like(obj: &Bound<'_, PyAny>) -> PyResult<Option<devmm::DType>> {
    let py = obj.py();
    let (kind, itemsize) = (intern!(py, "kind"), intern!(py, "itemsize"));
    if obj.is_instance_of::<PyType>() || !obj.hasattr(kind)? || !obj.hasattr(itemsize)? {
        return Ok(None);
    }
    if obj.hasattr(intern!(py, "str"))? && obj.hasattr(intern!(py, "name"))? {
        return from_numpy(obj).map(Some);
    }
    let (Ok(kind), Ok(itemsize)) = (
        obj.getattr(kind)?.extract(),
        obj.getattr(itemsize)?.extract(),
    ) else {
        return Ok(None);
    };
    Ok(Some(devmm::DType::from_kind(kind, itemsize).py()?))
}

/// `numpy.dtype(obj)`, or `None` when NumPy is not installed or does not
/// read `obj` as a dtype. NumPy is imported only here, for spellings only it
/// knows.
fn numpy_dtype<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyAny>>> {
    let Ok(numpy) = obj.py().import("numpy") else {
        return Ok(None);
    };
    Ok(numpy.getattr("dtype")?.call1((obj,)).ok())
}

/// A NumPy dtype as DLPack's type: its type string and name, read by the
/// core (`DType::from_typestr`, which refuses big-endian data and kinds
/// DLPack has no code for).
fn from_numpy(dtype: &Bound<'_, PyAny>) -> PyResult<devmm::DType> {
    let typestr: String = dtype.getattr("str")?.extract()?;
    let name: String = dtype.getattr("name")?.extract()?;
    devmm::DType::from_typestr(&typestr, &name).py()
}

/// A `torch.dtype` (`torch.float32` prints as `"torch.float32"`), or `None`
/// for any other object.
fn torch_dtype(obj: &Bound<'_, PyAny>) -> PyResult<Option<devmm::DType>> {
    let ty = obj.get_type();
    if ty.module()?.to_str()? != "torch" || ty.name()?.to_str()? != "dtype" {
        return Ok(None);
    }
    Ok(Some(
        devmm::DType::from_torch_name(obj.str()?.to_str()?).py()?,
    ))
}
