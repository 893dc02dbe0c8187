//! `DType`: DLPack's `(code, bits, lanes)` element types.

use std::sync::Mutex;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyString, PyType};

use crate::count::in_range;
use crate::error::IntoPyResult;

/// An element type, spelled as DLPack's `DLDataType`.
#[pyclass(frozen, eq, hash, name = "DType", module = "devmm")]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PyDType {
    pub(crate) inner: devmm::DType,
}

impl From<devmm::DType> for PyDType {
    fn from(inner: devmm::DType) -> Self {
        PyDType { inner }
    }
}

#[pymethods]
impl PyDType {
    /// The DLPack type `(code, bits, lanes)`: any `DLDataTypeCode` up to
    /// DLPack 1.1's float8/float6/float4 codes (17). A code devmm does not
    /// know, zero bits or lanes, or values out of range are a `ValueError`.
    #[new]
    #[pyo3(signature = (code, bits, lanes = 1))]
    fn py_new(code: i128, bits: i128, lanes: i128) -> PyResult<Self> {
        let code: u8 = in_range("code", code, "a DLPack type code from 0 to 17")?;
        let code = devmm::DTypeCode::from_dlpack(code).ok_or_else(|| {
            PyValueError::new_err(format!(
                "code {code} is not a DLPack type code devmm knows (0 to 17)"
            ))
        })?;
        let bits: u8 = in_range("bits", bits, "a bit width from 1 to 255")?;
        let lanes: u16 = in_range("lanes", lanes, "a lane count from 1 to 65535")?;
        Ok(devmm::DType::new(code, bits, lanes).py()?.into())
    }

    /// The dtype `obj` names: a `DType`; a name (`"float32"`,
    /// `"float8_e4m3fn"`); a NumPy dtype, scalar type (`np.float32`) or type
    /// code (`"f4"`, `"<i8"`); an `ml_dtypes` type; a `torch` dtype.
    /// Anything else is a `TypeError`, a type DLPack cannot express a
    /// `ValueError`.
    #[staticmethod]
    fn from_any(obj: DTypeArg) -> Self {
        obj.0.into()
    }

    /// Parses a standard name: `"float32"`, `"bfloat16"`, `"complex64"`, `"bool"`, ...
    #[staticmethod]
    fn from_string(name: &str) -> PyResult<Self> {
        Ok(name.parse::<devmm::DType>().py()?.into())
    }

    /// The DLPack type code (0 int, 1 uint, 2 float, 4 bfloat, 5 complex,
    /// 6 bool, 7 to 17 the float8/float6/float4 types).
    #[getter]
    fn code(&self) -> u8 {
        self.inner.code() as u8
    }

    /// Bits per lane.
    #[getter]
    fn bits(&self) -> u8 {
        self.inner.bits()
    }

    /// Lanes per element (1 for scalars).
    #[getter]
    fn lanes(&self) -> u16 {
        self.inner.lanes()
    }

    /// Bytes per element (rounded up for the sub-byte float4/float6 types).
    #[getter]
    fn itemsize(&self) -> usize {
        self.inner.itemsize()
    }

    /// The standard name, or a `Float32x4`-style spelling for vector types.
    #[getter]
    fn name(&self) -> String {
        self.inner.to_string()
    }

    fn __repr__(&self) -> String {
        format!("DType('{}')", self.inner)
    }

    fn __str__(&self) -> String {
        self.inner.to_string()
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, (String,))> {
        Ok((
            py.get_type::<PyDType>().getattr("from_string")?,
            (self.inner.to_string(),),
        ))
    }
}

/// An element-type argument: whatever `DType.from_any` takes.
///
/// Python type: `DType | str | type[Any] | numpy.dtype[Any] | _TorchDType`
/// Python protocol: `_TorchDType(itemsize: int, is_floating_point: bool, is_complex: bool, is_signed: bool)` A `torch.dtype` (`torch.float32`), named by its attributes so the stubs do not depend on torch (at run time only a real `torch.dtype` is read); `ml_dtypes` types are NumPy scalar types.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DTypeArg(pub(crate) devmm::DType);

impl<'py> FromPyObject<'_, 'py> for DTypeArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        if let Ok(dtype) = obj.cast::<PyDType>() {
            return Ok(DTypeArg(dtype.get().inner));
        }
        let obj = obj.to_owned();
        if let Ok(name) = obj.cast::<PyString>() {
            if let Some(dtype) = NAMES.get(name) {
                return Ok(DTypeArg(dtype));
            }
            return match name.to_str()?.parse() {
                Ok(dtype) => {
                    NAMES.put(name, dtype);
                    Ok(DTypeArg(dtype))
                }
                // NumPy type codes ("f4", "<i8") when NumPy is there to read them.
                Err(err) => numpy_dtype(&obj)?.map_or(Err(err).py(), |np| from_numpy(&np)),
            };
        }
        if is_numpy_dtype(&obj)? {
            return from_numpy(&obj);
        }
        if let Some(dtype) = torch_dtype(&obj)? {
            return Ok(DTypeArg(dtype));
        }
        // Scalar types: np.float32, ml_dtypes.bfloat16.
        if obj.is_instance_of::<PyType>() {
            if let Some(np) = numpy_dtype(&obj)? {
                return from_numpy(&np);
            }
        }
        Err(PyTypeError::new_err(format!(
            "cannot interpret {} as a dtype: pass a devmm.DType, a name such as \"float32\", \
             a NumPy dtype, scalar type or type code, or a torch/ml_dtypes dtype",
            obj.repr()?
        )))
    }
}

/// The dtype names parsed last, by string object: a program spells its
/// dtypes with a few literals, so the same objects come back call after
/// call and are recognised by identity instead of parsed again. The cache
/// holds each string, so an address cannot be reused by another.
struct NameCache(Mutex<[Option<CachedName>; NameCache::SLOTS]>);

/// A name's string object and the dtype it parsed as.
type CachedName = (Py<PyString>, devmm::DType);

static NAMES: NameCache = NameCache(Mutex::new([const { None }; NameCache::SLOTS]));

impl NameCache {
    const SLOTS: usize = 4;

    fn get(&self, name: &Bound<'_, PyString>) -> Option<devmm::DType> {
        let slots = self.0.lock().unwrap_or_else(|e| e.into_inner());
        slots
            .iter()
            .flatten()
            .find(|(cached, _)| cached.is(name))
            .map(|(_, dtype)| *dtype)
    }

    /// Remembers `name`, pushing out the oldest entry.
    fn put(&self, name: &Bound<'_, PyString>, dtype: devmm::DType) {
        // Plain `str` only: a subclass's `__del__` could run Python code.
        if !name.is_exact_instance_of::<PyString>() {
            return;
        }
        let evicted = {
            let mut slots = self.0.lock().unwrap_or_else(|e| e.into_inner());
            slots.rotate_right(1);
            slots[0].replace((name.clone().unbind(), dtype))
        };
        // Released outside the lock, while attached: a plain decref.
        drop(evicted);
    }
}

/// Whether `obj` is a NumPy dtype (duck-typed: `kind`, `itemsize`, and the
/// `str` and `name` that `from_numpy` reads).
fn is_numpy_dtype(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    for attr in ["kind", "itemsize", "str", "name"] {
        if !obj.hasattr(attr)? {
            return Ok(false);
        }
    }
    Ok(!obj.is_instance_of::<PyType>())
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
fn from_numpy(dtype: &Bound<'_, PyAny>) -> PyResult<DTypeArg> {
    let typestr: String = dtype.getattr("str")?.extract()?;
    let name: String = dtype.getattr("name")?.extract()?;
    Ok(DTypeArg(devmm::DType::from_typestr(&typestr, &name).py()?))
}

/// A `torch.dtype` (`torch.float32` prints as `"torch.float32"`), or `None`
/// for any other object.
fn torch_dtype(obj: &Bound<'_, PyAny>) -> PyResult<Option<devmm::DType>> {
    let ty = obj.get_type();
    if ty.module()?.to_str()? != "torch" || ty.name()?.to_str()? != "dtype" {
        return Ok(None);
    }
    let text = obj.str()?;
    let name = text.to_str()?.trim_start_matches("torch.");
    Ok(Some(name.parse().py()?))
}
