//! `Device` and `DeviceType`: DLPack's device numbering as Python values.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::error::IntoPyResult;

/// The kind of memory a device owns. The values are DLPack's
/// `DLDeviceType` codes, so `int(t)` is what `__dlpack_device__` reports.
#[pyclass(eq, eq_int, hash, frozen, name = "DeviceType", module = "devmm")]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum PyDeviceType {
    /// Ordinary host memory.
    #[pyo3(name = "CPU")]
    Cpu = 1,
    /// CUDA device memory.
    #[pyo3(name = "CUDA")]
    Cuda = 2,
    /// Page-locked host memory registered with CUDA.
    #[pyo3(name = "CUDA_HOST")]
    CudaHost = 3,
    /// ROCm (HIP) device memory.
    #[pyo3(name = "ROCM")]
    Rocm = 10,
    /// Page-locked host memory registered with ROCm.
    #[pyo3(name = "ROCM_HOST")]
    RocmHost = 11,
    /// CUDA managed (unified) memory.
    #[pyo3(name = "CUDA_MANAGED")]
    CudaManaged = 13,
}

impl From<devmm::DeviceType> for PyDeviceType {
    fn from(ty: devmm::DeviceType) -> Self {
        match ty {
            devmm::DeviceType::Cpu => PyDeviceType::Cpu,
            devmm::DeviceType::Cuda => PyDeviceType::Cuda,
            devmm::DeviceType::CudaHost => PyDeviceType::CudaHost,
            devmm::DeviceType::Rocm => PyDeviceType::Rocm,
            devmm::DeviceType::RocmHost => PyDeviceType::RocmHost,
            devmm::DeviceType::CudaManaged => PyDeviceType::CudaManaged,
        }
    }
}

impl PyDeviceType {
    /// The class attribute for `ty`: one object per member, as with `IntEnum`.
    pub(crate) fn member(py: Python<'_>, ty: devmm::DeviceType) -> PyResult<Py<PyDeviceType>> {
        let name = PyDeviceType::from(ty).name();
        Ok(py
            .get_type::<PyDeviceType>()
            .getattr(name)?
            .cast_into::<PyDeviceType>()?
            .unbind())
    }
}

impl From<PyDeviceType> for devmm::DeviceType {
    fn from(ty: PyDeviceType) -> Self {
        match ty {
            PyDeviceType::Cpu => devmm::DeviceType::Cpu,
            PyDeviceType::Cuda => devmm::DeviceType::Cuda,
            PyDeviceType::CudaHost => devmm::DeviceType::CudaHost,
            PyDeviceType::Rocm => devmm::DeviceType::Rocm,
            PyDeviceType::RocmHost => devmm::DeviceType::RocmHost,
            PyDeviceType::CudaManaged => devmm::DeviceType::CudaManaged,
        }
    }
}

#[pymethods]
impl PyDeviceType {
    /// The member for a DLPack device-type code, like `IntEnum(value)`.
    #[new]
    fn py_new(py: Python<'_>, value: i32) -> PyResult<Py<Self>> {
        let ty = devmm::DeviceType::from_dlpack(value)
            .ok_or_else(|| PyValueError::new_err(format!("{value} is not a valid DeviceType")))?;
        PyDeviceType::member(py, ty)
    }

    /// The DLPack code.
    #[getter]
    fn value(&self) -> i32 {
        *self as i32
    }

    /// The member's name (`"CPU"`).
    #[getter]
    fn name(&self) -> &'static str {
        match self {
            PyDeviceType::Cpu => "CPU",
            PyDeviceType::Cuda => "CUDA",
            PyDeviceType::CudaHost => "CUDA_HOST",
            PyDeviceType::Rocm => "ROCM",
            PyDeviceType::RocmHost => "ROCM_HOST",
            PyDeviceType::CudaManaged => "CUDA_MANAGED",
        }
    }

    fn __index__(&self) -> i32 {
        *self as i32
    }

    fn __repr__(&self) -> String {
        format!("<DeviceType.{}: {}>", self.name(), *self as i32)
    }
}

/// One device: a type and an ordinal. A frozen value; equal devices hash
/// alike, so devices key dictionaries.
#[pyclass(frozen, eq, hash, name = "Device", module = "devmm")]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PyDevice {
    pub(crate) inner: devmm::Device,
}

impl From<devmm::Device> for PyDevice {
    fn from(inner: devmm::Device) -> Self {
        PyDevice { inner }
    }
}

#[pymethods]
impl PyDevice {
    /// A device of `type` (a `DeviceType`, its code, or its name) with
    /// ordinal `index`; a negative or too-large ordinal is a `ValueError`.
    #[new]
    #[pyo3(signature = (r#type, index = Ordinal(0)))]
    fn py_new(r#type: &Bound<'_, PyAny>, index: Ordinal) -> PyResult<Self> {
        let Ordinal(index) = index;
        let ty = if let Ok(ty) = r#type.extract::<PyDeviceType>() {
            devmm::DeviceType::from(ty)
        } else if let Ok(code) = r#type.extract::<i32>() {
            devmm::DeviceType::from_dlpack(code)
                .ok_or_else(|| PyValueError::new_err(format!("{code} is not a valid DeviceType")))?
        } else {
            r#type.extract::<String>()?.parse().py()?
        };
        Ok(devmm::Device::try_new(ty, index).py()?.into())
    }

    /// Parses `"cpu"`, `"cuda:1"`, `"rocm:0"`, `"cuda_host"` (ordinal defaults to 0).
    #[staticmethod]
    fn from_string(text: &str) -> PyResult<Self> {
        Ok(text.parse::<devmm::Device>().py()?.into())
    }

    /// The device type.
    #[getter]
    fn r#type(&self, py: Python<'_>) -> PyResult<Py<PyDeviceType>> {
        PyDeviceType::member(py, self.inner.ty())
    }

    /// The ordinal.
    #[getter]
    fn index(&self) -> u32 {
        self.inner.index()
    }

    /// `(device_type, device_id)` as the DLPack protocol reports it.
    fn __dlpack_device__(&self) -> (i32, i32) {
        self.inner.dlpack_device()
    }

    fn __repr__(&self) -> String {
        format!(
            "Device(type={}, index={})",
            PyDeviceType::from(self.inner.ty()).__repr__(),
            self.inner.index()
        )
    }

    fn __str__(&self) -> String {
        self.inner.to_string()
    }

    /// Devices are frozen values, as a frozen dataclass is: assigning a
    /// field raises `dataclasses.FrozenInstanceError`.
    fn __setattr__(&self, py: Python<'_>, name: &str, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(frozen_instance_error(py, name))
    }

    fn __delattr__(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        Err(frozen_instance_error(py, name))
    }
}

/// `dataclasses.FrozenInstanceError` for an attempt to change `field`.
fn frozen_instance_error(py: Python<'_>, field: &str) -> PyErr {
    let message =
        format!("cannot assign to field '{field}': a devmm.Device is frozen; build a new one");
    match py
        .import("dataclasses")
        .and_then(|m| m.getattr("FrozenInstanceError"))
        .and_then(|class| class.call1((message,)))
    {
        Ok(err) => PyErr::from_value(err),
        Err(err) => err,
    }
}

/// A device ordinal argument (`Device`'s `index`): a negative or oversized
/// int is a `ValueError` naming `index` (the core checks the upper bound),
/// not the `OverflowError` a bare `u32` conversion raises.
///
/// Python type: `int`
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ordinal(u32);

impl<'py> FromPyObject<'_, 'py> for Ordinal {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        let value: i128 = obj.extract()?;
        u32::try_from(value).map(Ordinal).map_err(|_| {
            PyValueError::new_err(format!(
                "index must be a device ordinal from 0 to 2147483647, not {value}"
            ))
        })
    }
}

/// A device argument: a `Device` or its string form.
///
/// Python type: `Device | str`
#[derive(Clone, Copy, Debug)]
pub(crate) struct DeviceArg(pub(crate) devmm::Device);

impl<'py> FromPyObject<'_, 'py> for DeviceArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        if let Ok(device) = obj.cast::<PyDevice>() {
            return Ok(DeviceArg(device.get().inner));
        }
        if let Ok(text) = obj.cast::<PyString>() {
            return Ok(DeviceArg(text.to_str()?.parse().py()?));
        }
        Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "expected a devmm.Device or a device string like \"cuda:0\", got {}",
            obj.get_type().name()?
        )))
    }
}
