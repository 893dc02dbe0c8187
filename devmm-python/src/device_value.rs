//! `Device` and `DeviceType` as Python values: the core's device and device
//! type converted to the `devmm.DeviceType` enum member and the one
//! `devmm.Device` dataclass instance of each value. Below the error
//! conversions (which report a device), so it needs nothing from them;
//! reading them back from Python (argument parsing) is `device`'s.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyDict;

use crate::value_class::ValueClass;

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

/// A core device as Python's `devmm.Device`, a frozen dataclass defined in
/// `devmm._core.device` whose checks, parsing and string forms are the
/// functions below.
///
/// Python class: `devmm._core.device.Device`
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PyDevice(pub(crate) devmm::Device);

pub(crate) static DEVICE: ValueClass<devmm::Device> =
    ValueClass::new("devmm._core.device", "Device");

impl From<devmm::Device> for PyDevice {
    fn from(device: devmm::Device) -> Self {
        PyDevice(device)
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

/// `(type, index)` as the dataclass keeps them.
pub(crate) fn fields(device: devmm::Device) -> (PyDeviceType, u32) {
    (PyDeviceType(device.ty()), device.index())
}
