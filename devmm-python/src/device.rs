//! `Device` and `DeviceType`: DLPack's device numbering as Python values.
//! `DeviceType` is an `enum.IntEnum` built here from the core's list;
//! `Device` is a dataclass defined in Python (`devmm._core.device`) over
//! the functions here.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString};

use crate::error::{expected, IntoPyResult};
use crate::value_class::{IntField, ValueClass};

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
                    "The kind of memory a device owns; the values are DLPack's DLDeviceType codes.\n\n\
                     Examples\n\
                     --------\n\n\
                     >>> import devmm\n\
                     >>> devmm.DeviceType.CUDA, int(devmm.DeviceType.ROCM)\n\
                     (<DeviceType.CUDA: 2>, 10)\n\
                     >>> devmm.DeviceType(1) is devmm.DeviceType.CPU\n\
                     True\n",
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

/// The device type of the integer `code`, read whole (a huge one is the
/// core's `ValueError`, not a conversion's `OverflowError`); one devmm does
/// not know is a `ValueError`.
pub(crate) fn type_of_code(code: i128) -> PyResult<devmm::DeviceType> {
    devmm::DeviceType::from_code(code).py()
}

/// A core device as Python's `devmm.Device`, a frozen dataclass defined in
/// `devmm._core.device` whose checks, parsing and string forms are the
/// functions below.
///
/// Python class: `devmm._core.device.Device`
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PyDevice(pub(crate) devmm::Device);

static DEVICE: ValueClass<devmm::Device> = ValueClass::new("devmm._core.device", "Device");

impl From<devmm::Device> for PyDevice {
    fn from(device: devmm::Device) -> Self {
        PyDevice(device)
    }
}

impl PyDevice {
    /// The device a `devmm.Device` holds, or `None` for any other object.
    pub(crate) fn read(obj: &Bound<'_, PyAny>) -> PyResult<Option<devmm::Device>> {
        if !DEVICE.holds(obj)? {
            return Ok(None);
        }
        // The fields were checked at construction, so they fit their types.
        let py = obj.py();
        let ty = type_of_code(obj.getattr(intern!(py, "type"))?.extract()?)?;
        let index: u32 = obj.getattr(intern!(py, "index"))?.extract()?;
        devmm::Device::try_new(ty, index).py().map(Some)
    }
}

impl<'py> IntoPyObject<'py> for PyDevice {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    /// The one `devmm.Device` of this value.
    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let PyDevice(device) = self;
        DEVICE.instance(py, device, || fields(device))
    }
}

/// `Device.__post_init__`: `type` (a `DeviceType`, its code, or its name)
/// and `index` as the dataclass keeps them; a negative or too-large ordinal
/// is a `ValueError`.
#[pyfunction]
pub(crate) fn _check_device(
    r#type: &Bound<'_, PyAny>,
    index: IntField,
) -> PyResult<(PyDeviceType, u32)> {
    let index = devmm::Device::checked_index(index.0).py()?;
    let ty = match r#type.cast::<PyString>() {
        Ok(name) => name.to_str()?.parse().py()?,
        // A `DeviceType` member is its code, an int.
        Err(_) => devmm::DeviceType::from_code(r#type.extract::<IntField>()?.0).py()?,
    };
    devmm::Device::try_new(ty, index).py().map(fields)
}

/// `Device.from_string`: the fields of the device `text` names.
#[pyfunction]
pub(crate) fn _parse_device(text: &str) -> PyResult<(PyDeviceType, u32)> {
    text.parse().py().map(fields)
}

/// `(type, index)` as the dataclass keeps them.
fn fields(device: devmm::Device) -> (PyDeviceType, u32) {
    (PyDeviceType(device.ty()), device.index())
}

/// `str(device)`: `"cuda:1"`.
#[pyfunction]
pub(crate) fn _device_str(device: DeviceArg) -> String {
    device.0.to_string()
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
        if let Some(device) = PyDevice::read(&obj)? {
            return Ok(DeviceArg(device));
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
