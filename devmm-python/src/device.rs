//! `Device` and `DeviceType`: DLPack's device numbering as Python values.
//! `DeviceType` is an `enum.IntEnum` built from the core's list;
//! `Device` is a dataclass defined in Python (`devmm._core.device`) over
//! the functions here. Their conversions to Python are `device_value`'s;
//! reading them back (argument parsing) is here.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::device_value::{fields, DEVICE};
pub(crate) use crate::device_value::{PyDevice, PyDeviceType};
use crate::error::IntoPyResult;
use crate::expected::expected;
use crate::value_class::IntField;

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
