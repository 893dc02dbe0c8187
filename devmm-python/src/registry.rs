//! The current-resource registry as Python sees it: a process-wide map of
//! strong references keyed by device, overridden per `contextvars` context
//! by `using_memory_resource`, so overrides follow threads and async tasks.
//!
//! Python keeps its own map (so `get_current_memory_resource` returns the
//! very object that was installed) and mirrors process-wide changes into
//! the core registry, so Rust code in the same process agrees.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{IntoPyDict, PyTuple};
use pyo3::{intern, PyClassInitializer};
use pyo3::{PyTraverseError, PyVisit};

use crate::device::DeviceArg;
use crate::error::IntoPyResult;
use crate::host_resources::PyMallocMemoryResource;
use crate::resource::{resource_of, PyMemoryResource};

/// A resource as both the Python object users passed and its Rust resource.
pub(crate) struct Current {
    pub(crate) obj: Py<PyMemoryResource>,
    pub(crate) mr: Arc<dyn devmm::MemoryResource>,
}

/// One `using_memory_resource` override; frames chain to the ones outside.
#[pyclass(frozen, name = "_OverrideFrame", module = "devmm")]
pub(crate) struct PyOverrideFrame {
    device: devmm::Device,
    obj: Py<PyMemoryResource>,
    mr: Arc<dyn devmm::MemoryResource>,
    parent: Option<Py<PyOverrideFrame>>,
    /// The token of the `ContextVar.set` that made this frame current: it
    /// lives with the frame, so each context resets the token it made.
    token: OnceLock<Py<PyAny>>,
}

#[pymethods]
impl PyOverrideFrame {
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.obj)?;
        visit.call(&self.parent)?;
        visit.call(self.token.get())
    }
}

fn context_var(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static VAR: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    VAR.get_or_try_init(py, || {
        let contextvars = py.import("contextvars")?;
        let kwargs = [("default", py.None())].into_py_dict(py)?;
        Ok::<_, PyErr>(
            contextvars
                .getattr("ContextVar")?
                .call(("devmm.current_memory_resource",), Some(&kwargs))?
                .unbind(),
        )
    })
    .map(|var| var.bind(py))
}

/// The process-wide current resources, one entry per device. A process
/// uses a handful of devices, so a list beats hashing on every allocation.
#[derive(Default)]
struct Global {
    entries: Vec<(devmm::Device, Current)>,
}

impl Global {
    fn get(&self, device: devmm::Device) -> Option<&Current> {
        self.entries
            .iter()
            .find(|(d, _)| *d == device)
            .map(|(_, c)| c)
    }

    /// The entry for `device`, installing `current` if there is none.
    fn get_or_insert(&mut self, device: devmm::Device, current: Current) -> &Current {
        let index = match self.entries.iter().position(|(d, _)| *d == device) {
            Some(index) => index,
            None => {
                self.entries.push((device, current));
                self.entries.len() - 1
            }
        };
        &self.entries[index].1
    }

    /// Installs `current` for `device`, returning the entry it replaces.
    fn insert(&mut self, device: devmm::Device, current: Current) -> Option<Current> {
        match self.entries.iter_mut().find(|(d, _)| *d == device) {
            Some((_, slot)) => Some(std::mem::replace(slot, current)),
            None => {
                self.entries.push((device, current));
                None
            }
        }
    }
}

fn lock_global() -> std::sync::MutexGuard<'static, Global> {
    static GLOBAL: Mutex<Global> = Mutex::new(Global {
        entries: Vec::new(),
    });
    // Entries are replaced whole; a panic elsewhere cannot leave one torn.
    GLOBAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Wraps a resource the core handed out (a runtime's default) as a Python
/// object, checked like every resource Python makes: the CPU runtime's
/// default is a `MallocMemoryResource`.
fn wrap_native(
    py: Python<'_>,
    mr: Arc<dyn devmm::MemoryResource>,
) -> PyResult<Py<PyMemoryResource>> {
    let base = PyMemoryResource::checked(mr);
    if base
        .native
        .as_ref()
        .is_some_and(|mr| mr.device() == devmm::Device::CPU)
    {
        let init = PyClassInitializer::from(base).add_subclass(PyMallocMemoryResource);
        Ok(Bound::new(py, init)?.into_super().unbind())
    } else {
        Py::new(py, base)
    }
}

/// Whether any `using_memory_resource` block was ever entered. Until one
/// is, no context can hold an override, so lookups skip the context
/// variable (a Python call) on the allocation path.
static OVERRIDES_USED: AtomicBool = AtomicBool::new(false);

/// The resource in force on `device` in the current context.
pub(crate) fn current(py: Python<'_>, device: devmm::Device) -> PyResult<Current> {
    let mut frame = if OVERRIDES_USED.load(Ordering::Acquire) {
        context_var(py)?.call_method0(intern!(py, "get"))?
    } else {
        py.None().into_bound(py)
    };
    while let Ok(found) = frame.cast::<PyOverrideFrame>() {
        let f = found.get();
        if f.device == device {
            return Ok(Current {
                obj: f.obj.clone_ref(py),
                mr: Arc::clone(&f.mr),
            });
        }
        let parent = match &f.parent {
            Some(parent) => parent.bind(py).clone().into_any(),
            None => break,
        };
        frame = parent;
    }
    if let Some(entry) = lock_global().get(device) {
        return Ok(Current {
            obj: entry.obj.clone_ref(py),
            mr: Arc::clone(&entry.mr),
        });
    }
    // Buffers allocate through the core's resource itself: a buffer frees
    // exactly what it allocated, so only Python's raw calls, through the
    // object, pay for the ledger.
    let mr = devmm::get_current_memory_resource(device).py()?;
    let obj = wrap_native(py, Arc::clone(&mr))?;
    let mut global = lock_global();
    // Another thread may have installed one meanwhile: theirs stays.
    let entry = global.get_or_insert(device, Current { obj, mr });
    Ok(Current {
        obj: entry.obj.clone_ref(py),
        mr: Arc::clone(&entry.mr),
    })
}

fn resolve_device(device: Option<DeviceArg>) -> PyResult<devmm::Device> {
    match device {
        Some(device) => Ok(device.0),
        None => devmm::default_device().py(),
    }
}

/// The resource `empty` and `DeviceBuffer` use on `device` (the default
/// device when `None`): the innermost `using_memory_resource` override of
/// this context, else the process-wide one, else the runtime's default.
#[pyfunction]
#[pyo3(signature = (device = None))]
pub(crate) fn get_current_memory_resource(
    py: Python<'_>,
    device: Option<DeviceArg>,
) -> PyResult<Py<PyMemoryResource>> {
    Ok(current(py, resolve_device(device)?)?.obj)
}

/// Makes `mr` the process-wide current resource of `mr.device`; returns
/// the resource it replaces (`None` if there was none yet).
#[pyfunction]
pub(crate) fn set_current_memory_resource(
    py: Python<'_>,
    mr: &Bound<'_, PyMemoryResource>,
) -> PyResult<Option<Py<PyMemoryResource>>> {
    let rust = resource_of(mr)?;
    let device = rust.device();
    devmm::set_current_memory_resource(Arc::clone(&rust));
    let previous = lock_global().insert(
        device,
        Current {
            obj: mr.clone().unbind(),
            mr: rust,
        },
    );
    Ok(previous.map(|p| p.obj.clone_ref(py)))
}

/// A context manager making `mr` current on its device for the body of a
/// `with` block (in this context only); `as` binds the resource. One object
/// may be entered by several threads or async tasks at once: each entry's
/// state lives in its own context.
#[pyclass(frozen, name = "using_memory_resource", module = "devmm")]
pub(crate) struct PyUsingMemoryResource {
    obj: Py<PyMemoryResource>,
    mr: Arc<dyn devmm::MemoryResource>,
}

#[pymethods]
impl PyUsingMemoryResource {
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.obj)
    }

    #[new]
    fn py_new(mr: &Bound<'_, PyMemoryResource>) -> PyResult<Self> {
        Ok(PyUsingMemoryResource {
            mr: resource_of(mr)?,
            obj: mr.clone().unbind(),
        })
    }

    fn __enter__(&self, py: Python<'_>) -> PyResult<Py<PyMemoryResource>> {
        OVERRIDES_USED.store(true, Ordering::Release);
        let var = context_var(py)?;
        let parent = var.call_method0(intern!(py, "get"))?;
        let frame = Py::new(
            py,
            PyOverrideFrame {
                device: self.mr.device(),
                obj: self.obj.clone_ref(py),
                mr: Arc::clone(&self.mr),
                parent: parent
                    .cast::<PyOverrideFrame>()
                    .ok()
                    .map(|p| p.clone().unbind()),
                token: OnceLock::new(),
            },
        )?;
        let token = var.call_method1(intern!(py, "set"), (frame.clone_ref(py),))?;
        // The frame is new and not yet seen by anyone else: this set wins.
        let _ = frame.get().token.set(token.unbind());
        Ok(self.obj.clone_ref(py))
    }

    /// Undoes the innermost entry of this context, which must be one of
    /// this resource's (`RuntimeError` otherwise: blocks exited out of order).
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        let var = context_var(py)?;
        let current = var.call_method0(intern!(py, "get"))?;
        let token = current
            .cast::<PyOverrideFrame>()
            .ok()
            .filter(|frame| frame.get().obj.is(&self.obj))
            .and_then(|frame| frame.get().token.get().map(|t| t.clone_ref(py)));
        let Some(token) = token else {
            return Err(PyRuntimeError::new_err(format!(
                "using_memory_resource({}) is not the innermost override in this context; \
                 exit with blocks in reverse order of entry",
                self.obj.bind(py).repr()?
            )));
        };
        var.call_method1(intern!(py, "reset"), (token,))?;
        Ok(false)
    }
}
