//! `DType`: DLPack's `(code, bits, lanes)` element types.

use pyo3::prelude::*;
use pyo3::types::PyString;

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
    /// Parses a standard name: `"float32"`, `"bfloat16"`, `"complex64"`, `"bool"`, ...
    #[staticmethod]
    fn from_string(name: &str) -> PyResult<Self> {
        Ok(name.parse::<devmm::DType>().py()?.into())
    }

    /// The DLPack type code (0 int, 1 uint, 2 float, 4 bfloat, 5 complex, 6 bool).
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

    /// Bytes per element.
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

/// An element-type argument: a `DType`, a standard name, or anything whose
/// `str()` is one (a NumPy dtype).
///
/// Python type: `DType | str | Any`
#[derive(Clone, Copy, Debug)]
pub(crate) struct DTypeArg(pub(crate) devmm::DType);

impl<'py> FromPyObject<'_, 'py> for DTypeArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        if let Ok(name) = obj.cast::<PyString>() {
            return Ok(DTypeArg(name.to_str()?.parse().py()?));
        }
        if let Ok(dtype) = obj.cast::<PyDType>() {
            return Ok(DTypeArg(dtype.get().inner));
        }
        let name = obj.str()?;
        Ok(DTypeArg(name.to_str()?.parse().py()?))
    }
}
