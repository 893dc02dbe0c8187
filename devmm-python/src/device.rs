//! `Device` and `DeviceType`: DLPack's device numbering as Python values.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString};

use crate::count::in_range;
use crate::error::{expected, IntoPyResult};

/// The kind of memory a device owns: `devmm.DeviceType`, an
/// `enum.IntEnum` of the core's device types whose values are DLPack's
/// `DLDeviceType` codes, so `int(t)` is what `__dlpack_device__` reports,
/// `DeviceType(2)` is `DeviceType.CUDA`, and members are ints.
///
/// Python type: `DeviceType`
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PyDeviceType(pub(crate) devmm::DeviceType);

impl From<devmm::DeviceType> for PyDeviceType {
    fn from(ty: devmm::DeviceType) -> Self {
        PyDeviceType(ty)
    }
}

impl From<PyDeviceType> for devmm::DeviceType {
    fn from(ty: PyDeviceType) -> Self {
        ty.0
    }
}

/// The IntEnum's member name for `ty` (`CUDA_HOST`): the core's name, upper case.
fn member_name(ty: devmm::DeviceType) -> String {
    ty.name().to_uppercase()
}

impl PyDeviceType {
    /// The `devmm.DeviceType` class: an `enum.IntEnum` built once from the
    /// core's device types, so its members cannot drift from them.
    pub(crate) fn class(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
        static CLASS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
        CLASS
            .get_or_try_init(py, || {
                let members: Vec<(String, i32)> = devmm::DeviceType::ALL
                    .iter()
                    .map(|&ty| (member_name(ty), ty.dlpack_code()))
                    .collect();
                let options = PyDict::new(py);
                options.set_item("module", "devmm")?;
                let class = py
                    .import("enum")?
                    .getattr("IntEnum")?
                    .call(("DeviceType", members), Some(&options))?;
                class.setattr(
                    "__doc__",
                    "The kind of memory a device owns; the values are DLPack's DLDeviceType codes.",
                )?;
                Ok::<_, PyErr>(class.unbind())
            })
            .map(|class| class.bind(py))
    }
}

impl<'py> IntoPyObject<'py> for PyDeviceType {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    /// The enum member (one object per member, as with any `IntEnum`).
    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        PyDeviceType::class(py)?.getattr(member_name(self.into()))
    }
}

impl<'py> FromPyObject<'_, 'py> for PyDeviceType {
    type Error = PyErr;

    /// Members of `devmm.DeviceType` only; plain ints are codes, not types.
    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        let class = PyDeviceType::class(obj.py())?;
        if !obj.is_instance(class)? {
            return Err(expected("a devmm.DeviceType", &obj));
        }
        type_of_code(obj.extract()?).map(PyDeviceType)
    }
}

/// The device type of DLPack code `code`; one devmm does not know is a `ValueError`.
fn type_of_code(code: i32) -> PyResult<devmm::DeviceType> {
    devmm::DeviceType::from_dlpack(code)
        .ok_or_else(|| PyValueError::new_err(format!("{code} is not a valid DeviceType")))
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
        // A `DeviceType` member is its code, an int.
        let ty = match r#type.extract::<i32>() {
            Ok(code) => type_of_code(code)?,
            Err(_) => r#type.extract::<String>()?.parse().py()?,
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
    fn r#type(&self) -> PyDeviceType {
        self.inner.ty().into()
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
        let ty = self.inner.ty();
        format!(
            "Device(type=<DeviceType.{}: {}>, index={})",
            member_name(ty),
            ty.dlpack_code(),
            self.inner.index()
        )
    }

    fn __str__(&self) -> String {
        self.inner.to_string()
    }

    fn __reduce__(&self, py: Python<'_>) -> (Py<PyAny>, (i32, u32)) {
        (
            py.get_type::<PyDevice>().into_any().unbind(),
            (self.inner.dlpack_device().0, self.inner.index()),
        )
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
        let range = "a device ordinal from 0 to 2147483647";
        in_range("index", obj.extract()?, range).map(Ordinal)
    }
}

/// A device argument: a `Device` or its string form.
///
/// Python type: `Device | str`
#[derive(Clone, Copy, Debug)]
pub(crate) struct DeviceArg(pub(crate) devmm::Device);

impl DeviceArg {
    /// The device an optional argument names: the core's default device
    /// when it is `None`.
    pub(crate) fn or_default(arg: Option<Self>) -> PyResult<devmm::Device> {
        arg.map_or_else(
            || devmm::default_device().py(),
            |DeviceArg(device)| Ok(device),
        )
    }
}

impl<'py> FromPyObject<'_, 'py> for DeviceArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        if let Ok(device) = obj.cast::<PyDevice>() {
            return Ok(DeviceArg(device.get().inner));
        }
        if let Ok(text) = obj.cast::<PyString>() {
            return Ok(DeviceArg(text.to_str()?.parse().py()?));
        }
        Err(expected(
            "a devmm.Device or a device string like \"cuda:0\"",
            &obj,
        ))
    }
}
