//! Runtimes: one per platform, found by name, device or device type.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;

use crate::count::{Count, Handle};
use crate::device::{DeviceArg, PyDevice, PyDeviceType};
use crate::error::IntoPyResult;
use crate::stream::{maybe_detached, PyStream, PyStreamSentinel};

/// One platform's runtime: devices, memory information, streams.
#[pyclass(frozen, name = "DeviceRuntime", module = "devmm")]
pub(crate) struct PyDeviceRuntime {
    inner: Arc<dyn devmm::DeviceRuntime>,
}

#[pymethods]
impl PyDeviceRuntime {
    /// `"cpu"`, `"cuda"`, `"rocm"`, or a third party's name.
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// The device types the runtime serves, primary first.
    #[getter]
    fn device_types(&self) -> Vec<PyDeviceType> {
        self.inner
            .device_types()
            .iter()
            .map(|&t| PyDeviceType::from(t))
            .collect()
    }

    /// The devices of the primary type.
    fn devices(&self) -> PyResult<Vec<PyDevice>> {
        Ok(self
            .inner
            .devices()
            .py()?
            .into_iter()
            .map(PyDevice::from)
            .collect())
    }

    /// How many devices of the primary type exist.
    fn device_count(&self) -> PyResult<usize> {
        self.inner.device_count().py()
    }

    /// `(free, total)` bytes of `device`.
    fn memory_info(&self, py: Python<'_>, device: DeviceArg) -> PyResult<(usize, usize)> {
        let info = maybe_detached(py, device.0, || self.inner.memory_info(device.0)).py()?;
        Ok((info.free, info.total))
    }

    /// The built-in stream `which` (a sentinel) of `device`.
    fn stream(&self, device: DeviceArg, which: &PyStreamSentinel) -> PyResult<PyStream> {
        Ok(self.inner.stream(device.0, which.inner).py()?.into())
    }

    /// The default stream of `device`.
    fn default_stream(&self, device: DeviceArg) -> PyResult<PyStream> {
        Ok(self.inner.default_stream(device.0).py()?.into())
    }

    /// A new stream on `device`, destroyed when the last reference goes.
    fn create_stream(&self, py: Python<'_>, device: DeviceArg) -> PyResult<PyStream> {
        Ok(
            maybe_detached(py, device.0, || self.inner.create_stream(device.0))
                .py()?
                .into(),
        )
    }

    /// A stream over a native handle that the caller keeps alive.
    fn wrap_stream(&self, device: DeviceArg, handle: Count<Handle>) -> PyResult<PyStream> {
        let handle = handle.get();
        Ok(self.inner.wrap_stream(device.0, handle).py()?.into())
    }

    fn __repr__(&self) -> String {
        format!("DeviceRuntime(name={:?})", self.inner.name())
    }
}

/// What `runtime_for` accepts, looked up as it is read.
///
/// Python type: `Device | DeviceType | str`
pub(crate) struct RuntimeArg(Arc<dyn devmm::DeviceRuntime>);

impl<'py> FromPyObject<'_, 'py> for RuntimeArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        let runtime = if let Some(device) = PyDevice::read(&obj)? {
            devmm::runtime_for(device)
        } else if let Ok(ty) = obj.extract::<PyDeviceType>() {
            devmm::runtime_for(devmm::DeviceType::from(ty))
        } else {
            devmm::runtime_for(obj.extract::<String>()?.as_str())
        };
        Ok(RuntimeArg(runtime.py()?))
    }
}

/// The runtime for a device, a device type or a name; loaded on first use
/// and the same object afterwards. Raises `RuntimeUnavailableError` (an
/// `ImportError`) when none serves it.
#[pyfunction]
pub(crate) fn runtime_for(py: Python<'_>, which: RuntimeArg) -> PyResult<Py<PyDeviceRuntime>> {
    wrapper(py, which.0)
}

/// Every runtime whose platform is present, loaded (what `runtime_names()`
/// lists, in order), each the object `runtime_for` returns for it.
#[pyfunction]
pub(crate) fn available_runtimes(py: Python<'_>) -> PyResult<Vec<Py<PyDeviceRuntime>>> {
    devmm::available_runtimes()
        .py()?
        .into_iter()
        .map(|runtime| wrapper(py, runtime))
        .collect()
}

/// The one Python object for `runtime`, so identity checks hold.
fn wrapper(
    py: Python<'_>,
    runtime: Arc<dyn devmm::DeviceRuntime>,
) -> PyResult<Py<PyDeviceRuntime>> {
    static WRAPPERS: std::sync::OnceLock<Mutex<HashMap<String, Py<PyDeviceRuntime>>>> =
        std::sync::OnceLock::new();
    let mut wrappers = WRAPPERS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(existing) = wrappers.get(runtime.name()) {
        return Ok(existing.clone_ref(py));
    }
    let name = runtime.name().to_owned();
    let wrapper = Py::new(py, PyDeviceRuntime { inner: runtime })?;
    wrappers.insert(name, wrapper.clone_ref(py));
    Ok(wrapper)
}

/// The runtimes whose platform is present, found by probing only (no
/// driver is loaded). `DEVMM_RUNTIME` restricts the list to `cpu` and the
/// runtime it names.
#[pyfunction]
pub(crate) fn runtime_names() -> Vec<String> {
    devmm::runtime_names()
}

/// The device `empty` uses when none is given: `cpu:0`, or device 0 of the
/// runtime `DEVMM_RUNTIME` names.
#[pyfunction]
pub(crate) fn default_device() -> PyResult<PyDevice> {
    Ok(devmm::default_device().py()?.into())
}

/// Names the third-party runtimes the package found (its `devmm.runtimes`
/// entry points) to the core's discovery and returns why any was refused
/// (a built-in runtime's name), then checks `DEVMM_RUNTIME` against every
/// runtime known: a value naming none fails the import with
/// `RuntimeUnavailableError`, not the first allocation.
#[pyfunction]
pub(crate) fn _register_external_runtimes(names: Vec<String>) -> PyResult<Vec<(String, String)>> {
    let refused = names
        .into_iter()
        .filter_map(|name| {
            let err = devmm::runtime::register_external_runtime(&name).err()?;
            Some((name, err.to_string()))
        })
        .collect();
    devmm::runtime::check_runtime_override().py()?;
    Ok(refused)
}
