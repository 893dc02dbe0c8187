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
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{IntoPyDict, PyTuple};
use pyo3::{intern, PyTraverseError, PyVisit};

use crate::device::DeviceArg;
use crate::error::IntoPyResult;
use crate::resource::{object_of, resource_of, PyMemoryResource, PythonRef};
use crate::shipped::default_object_of;

type SharedResource = Arc<dyn devmm::MemoryResource>;

/// A context's overrides, the core's chain ([`devmm::Overrides`]), as the
/// value of the context variable.
#[pyclass(frozen, name = "_Overrides", module = "devmm._devmm")]
pub(crate) struct PyOverrides(devmm::Overrides);

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

/// The scope the core keeps its chain in: the context variable, so
/// overrides follow threads and async tasks. Entering, looking up and
/// exiting are the core's.
struct ContextScope;

impl devmm::OverrideScope for ContextScope {
    fn get(&self) -> devmm::Overrides {
        if !OVERRIDES_USED.load(Ordering::Acquire) {
            return devmm::Overrides::default();
        }
        // During interpreter shutdown no context holds an override.
        crate::gil::attach(|py| {
            let value = context_var(py).and_then(|var| var.call_method0(intern!(py, "get")));
            match value {
                Ok(value) => value
                    .cast::<PyOverrides>()
                    .map(|o| o.get().0.clone())
                    .unwrap_or_default(),
                Err(err) => {
                    err.write_unraisable(py, None);
                    devmm::Overrides::default()
                }
            }
        })
        .unwrap_or_default()
    }

    /// A failure to set the variable (or an interpreter shutting down) is
    /// reported as unraisable and leaves the context as it was.
    fn set(&self, overrides: devmm::Overrides) {
        OVERRIDES_USED.store(true, Ordering::Release);
        crate::gil::attach(|py| {
            let set = Bound::new(py, PyOverrides(overrides))
                .and_then(|value| context_var(py)?.call_method1(intern!(py, "set"), (value,)));
            if let Err(err) = set {
                err.write_unraisable(py, None);
            }
        });
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

/// Installs the context-variable scope into the core, once per process.
pub(crate) fn install() -> PyResult<()> {
    devmm::set_override_scope(ContextScope).py()
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
        devmm::enter_override(Arc::clone(&self.mr));
        Ok(self.obj.clone_ref(py))
    }

    /// Ends this object's innermost override in this context, as the core
    /// ends one (`devmm::exit_override`): wherever it is, the blocks entered
    /// after it staying in force; a `RuntimeError` when it was not the
    /// innermost, or is not in force here.
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        devmm::exit_override_of(&self.mr).py()?;
        Ok(false)
    }
}

/// Makes `mr` current on its device in this context until
/// [`_pop_override`] closes it: the stack `devmm.statistics.push_statistics`
/// keeps, in the core's one chain of overrides (`devmm::push_override`).
#[pyfunction]
pub(crate) fn _push_override(mr: &Bound<'_, PyMemoryResource>) -> PyResult<()> {
    devmm::push_override(resource_of(mr)?);
    Ok(())
}

/// Closes the innermost override [`_push_override`] opened on `device` (the
/// default device when `None`) in this context and returns its resource;
/// `None` when none is open (`devmm::pop_override`).
#[pyfunction]
#[pyo3(signature = (device = None))]
pub(crate) fn _pop_override(
    py: Python<'_>,
    device: Option<DeviceArg>,
) -> PyResult<Option<Py<PyMemoryResource>>> {
    devmm::pop_override(DeviceArg::or_default(device)?)
        .map(|mr| object_of(py, &mr))
        .transpose()
}
