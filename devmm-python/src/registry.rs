//! The current-resource registry as Python sees it: the core's own
//! (`devmm::get_current_memory_resource`), whose override scope this
//! module installs as a `contextvars.ContextVar`, so overrides follow
//! threads and async tasks, and Rust code called inside a
//! `with using_memory_resource(mr):` block sees `mr` too.
//!
//! The objects handed out are the very ones installed: every resource
//! reaches the core carrying its Python object as its origin
//! ([`resource_of`], [`object_of`]).

use std::any::Any;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{IntoPyDict, PyTuple};
use pyo3::{intern, PyTraverseError, PyVisit};

use crate::device::DeviceArg;
use crate::error::IntoPyResult;
use crate::resource::{default_object_of, object_of, resource_of, PyMemoryResource, PythonRef};

type SharedResource = Arc<dyn devmm::MemoryResource>;

/// One override; frames chain to the ones outside, and a context's value
/// of the context variable is its innermost frame.
#[pyclass(frozen, name = "_OverrideFrame", module = "devmm")]
pub(crate) struct PyOverrideFrame {
    mr: SharedResource,
    parent: Option<Py<PyOverrideFrame>>,
    /// The token of the `ContextVar.set` that made this frame current: it
    /// lives with the frame, so each context resets the token it made.
    token: OnceLock<Py<PyAny>>,
}

#[pymethods]
impl PyOverrideFrame {
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.parent)?;
        visit.call(self.token.get())
    }
}

/// The context variable, made once: lookups call its bound `get`.
fn context_var(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static VAR: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    VAR.get_or_try_init(py, || {
        let kwargs = [("default", py.None())].into_py_dict(py)?;
        Ok::<_, PyErr>(
            py.import("contextvars")?
                .getattr("ContextVar")?
                .call(("devmm.current_memory_resource",), Some(&kwargs))?
                .unbind(),
        )
    })
    .map(|var| var.bind(py))
}

/// Whether any override was ever entered. Until one is, no context can
/// hold one, so the allocation path skips the context variable (a
/// Python call) with one atomic load.
static OVERRIDES_USED: AtomicBool = AtomicBool::new(false);

/// The scope the core asks: the innermost frame of the current context.
struct ContextScope;

impl devmm::OverrideScope for ContextScope {
    fn current(&self, device: devmm::Device) -> Option<SharedResource> {
        if !OVERRIDES_USED.load(Ordering::Acquire) {
            return None;
        }
        // During interpreter shutdown no context holds an override.
        crate::gil::attach(|py| innermost(py, device).ok().flatten()).flatten()
    }

    /// A failure to set the variable (or an interpreter shutting down) is
    /// reported as unraisable and leaves nothing to restore.
    fn enter(&self, mr: SharedResource) -> Box<dyn Any> {
        let token = crate::gil::attach(|py| match enter(py, mr) {
            Ok(frame) => frame.get().token.get().map(|t| t.clone_ref(py)),
            Err(err) => {
                err.write_unraisable(py, None);
                None
            }
        });
        Box::new(ContextEntry(token.flatten()))
    }

    /// The runtime's default gets its Python object once, here, so every
    /// lookup returns that object. Allocations keep going straight to the
    /// default; only the object's own raw calls go through its ledger.
    fn adopt_default(&self, default: SharedResource) -> SharedResource {
        let adopted = crate::gil::attach(|py| {
            let obj = default_object_of(py, &default).ok()?;
            let origin: Arc<dyn Any + Send + Sync> = Arc::new(PythonRef::new(obj.into_any()));
            let tagged: SharedResource =
                Arc::new(devmm::WithOrigin::new(Arc::clone(&default), origin));
            Some(tagged)
        });
        adopted.flatten().unwrap_or(default)
    }
}

/// A Rust guard's override: reset when the guard drops, in the context
/// (the thread and Python call) that made it.
struct ContextEntry(Option<Py<PyAny>>);

impl Drop for ContextEntry {
    fn drop(&mut self) {
        let Some(token) = self.0.take() else { return };
        crate::gil::attach(|py| {
            let reset =
                context_var(py).and_then(|var| var.call_method1(intern!(py, "reset"), (token,)));
            if let Err(err) = reset {
                err.write_unraisable(py, None);
            }
        });
    }
}

/// Installs the context-variable scope into the core, once per process.
pub(crate) fn install() -> PyResult<()> {
    devmm::set_override_scope(ContextScope).py()
}

fn innermost(py: Python<'_>, device: devmm::Device) -> PyResult<Option<SharedResource>> {
    let mut frame = context_var(py)?.call_method0(intern!(py, "get"))?;
    while let Ok(found) = frame.cast_into::<PyOverrideFrame>() {
        let f = found.get();
        if f.mr.device() == device {
            return Ok(Some(Arc::clone(&f.mr)));
        }
        match &f.parent {
            Some(parent) => frame = parent.bind(py).clone().into_any(),
            None => break,
        }
    }
    Ok(None)
}

/// Makes `mr` the innermost override of the current context.
fn enter(py: Python<'_>, mr: SharedResource) -> PyResult<Bound<'_, PyOverrideFrame>> {
    OVERRIDES_USED.store(true, Ordering::Release);
    let var = context_var(py)?;
    let parent = var.call_method0(intern!(py, "get"))?;
    let frame = Bound::new(
        py,
        PyOverrideFrame {
            mr,
            parent: parent
                .cast_into::<PyOverrideFrame>()
                .ok()
                .map(Bound::unbind),
            token: OnceLock::new(),
        },
    )?;
    let token = var.call_method1(intern!(py, "set"), (&frame,))?;
    // The frame is new and not yet seen by anyone else: this set wins.
    let _ = frame.get().token.set(token.unbind());
    Ok(frame)
}

/// The resource in force on `device` in the current context, as both the
/// Python object and the core resource that stands for it.
pub(crate) struct Current {
    pub(crate) obj: Py<PyMemoryResource>,
    pub(crate) mr: SharedResource,
}

/// [`Current`] for `device`.
pub(crate) fn current(py: Python<'_>, device: devmm::Device) -> PyResult<Current> {
    let mr = devmm::get_current_memory_resource(device).py()?;
    Ok(Current {
        obj: object_of(py, &mr)?,
        mr,
    })
}

/// The resource `empty` and `DeviceBuffer` use on `device` (the default
/// device when `None`): the innermost `using_memory_resource` override of
/// this context, else the process-wide one, else the runtime's default.
///
/// `device` is a `Device`, a string or `None`. Returns a
/// `DeviceMemoryResource`; a device whose runtime is absent is a
/// `RuntimeUnavailableError`.
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm
/// >>> devmm.get_current_memory_resource("cpu")  # the runtime's default
/// MallocMemoryResource(device=cpu:0, alignment=64)
/// >>> stats = devmm.StatisticsAdaptor(devmm.get_current_memory_resource())
/// >>> with devmm.using_memory_resource(stats):
/// ...     devmm.get_current_memory_resource("cpu") is stats
/// True
///
/// ```
#[pyfunction]
#[pyo3(signature = (device = None))]
pub(crate) fn get_current_memory_resource(
    py: Python<'_>,
    device: Option<DeviceArg>,
) -> PyResult<Py<PyMemoryResource>> {
    Ok(current(py, DeviceArg::or_default(device)?)?.obj)
}

/// Makes `mr` the process-wide current resource of `mr.device`; returns
/// the resource it replaces (`None` if there was none yet).
///
/// `mr` is a `DeviceMemoryResource` (another object is a `TypeError`). It
/// changes the resource of every thread and task that has no override.
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm
/// >>> from devmm.mrs.cpu import MallocMemoryResource
/// >>> mine = MallocMemoryResource(alignment=256)
/// >>> previous = devmm.set_current_memory_resource(mine)
/// >>> devmm.get_current_memory_resource("cpu") is mine
/// True
/// >>> devmm.set_current_memory_resource(previous) is mine  # put the previous one back
/// True
///
/// ```
#[pyfunction]
pub(crate) fn set_current_memory_resource(
    py: Python<'_>,
    mr: &Bound<'_, PyMemoryResource>,
) -> PyResult<Option<Py<PyMemoryResource>>> {
    devmm::set_current_memory_resource(resource_of(mr)?)
        .map(|previous| object_of(py, &previous))
        .transpose()
}

/// A context manager making `mr` current on its device for the body of a
/// `with` block (in this context only); `as` binds the resource. One object
/// may be entered by several threads or async tasks at once: each entry's
/// state lives in its own context.
///
/// `using_memory_resource(mr)`: `mr` is a `DeviceMemoryResource`.
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm
/// >>> from devmm.mrs.cpu import MallocMemoryResource
/// >>> stats = devmm.StatisticsAdaptor(MallocMemoryResource())
/// >>> with devmm.using_memory_resource(stats) as active:
/// ...     t = devmm.empty((256,), "float32", layout=devmm.RowMajor())
/// >>> active is stats, stats.current_bytes
/// (True, 1024)
/// >>> devmm.get_current_memory_resource("cpu") is stats  # restored on exit
/// False
///
/// ```
#[pyclass(frozen, name = "using_memory_resource", module = "devmm")]
pub(crate) struct PyUsingMemoryResource {
    obj: Py<PyMemoryResource>,
    mr: SharedResource,
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
        enter(py, Arc::clone(&self.mr))?;
        Ok(self.obj.clone_ref(py))
    }

    /// Undoes the innermost entry of this context, which must be one of
    /// this object's (`RuntimeError` otherwise: blocks exited out of order).
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        let var = context_var(py)?;
        let current = var.call_method0(intern!(py, "get"))?;
        let token = current
            .cast::<PyOverrideFrame>()
            .ok()
            .filter(|frame| Arc::ptr_eq(&frame.get().mr, &self.mr))
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
