//! NEP 49 both ways: NumPy allocating through a devmm resource
//! (`devmm.integrations.numpy.install`), and NumPy's current allocator as a
//! devmm resource (`NumpyHandlerMemoryResource`).
//!
//! NumPy's handler is a `PyDataMem_Handler` struct inside a capsule named
//! `"mem_handler"`; `PyDataMem_SetHandler` / `PyDataMem_GetHandler` come
//! from NumPy's C-API table (the `_ARRAY_API` capsule), entries 304 and 305
//! since NumPy 1.22. Every array keeps a reference to the capsule of the
//! handler that allocated it, so our handler (and the resource it holds)
//! lives until the last such array is freed.

use std::ffi::{c_void, CStr};
use std::sync::{Arc, OnceLock};

use devmm::interop::{DataMemHandler, Nep49Handler, Nep49Resource};
use pyo3::exceptions::{PyImportError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;

use crate::device::DeviceArg;
use crate::error::IntoPyResult;
use crate::resource::{resource_of, shipped_new, PyMemoryResource};

const CAPSULE_NAME: &CStr = c"mem_handler";
const SET_HANDLER: usize = 304;
const GET_HANDLER: usize = 305;

type SetHandlerFn = unsafe extern "C" fn(*mut ffi::PyObject) -> *mut ffi::PyObject;
type GetHandlerFn = unsafe extern "C" fn() -> *mut ffi::PyObject;

/// NumPy's C-API table, found once per process.
fn api_table(py: Python<'_>) -> PyResult<*const *const c_void> {
    static TABLE: OnceLock<usize> = OnceLock::new();
    if let Some(&table) = TABLE.get() {
        return Ok(table as *const *const c_void);
    }
    let numpy = py.import("numpy").map_err(|e| {
        PyImportError::new_err(format!("devmm's NumPy integration needs numpy: {e}"))
    })?;
    let version: String = numpy.getattr("__version__")?.extract()?;
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    if (major, minor) < (1, 22) {
        return Err(PyImportError::new_err(format!(
            "NEP 49 allocators need numpy >= 1.22, found {version}"
        )));
    }
    let module = py
        .import("numpy._core._multiarray_umath")
        .or_else(|_| py.import("numpy.core._multiarray_umath"))?;
    let capsule = module.getattr("_ARRAY_API")?;
    // SAFETY: `capsule` is a live object; PyCapsule_GetPointer checks that it
    // is a capsule (NumPy's C-API capsule is unnamed, hence NULL) and sets
    // an exception otherwise.
    let table = unsafe { ffi::PyCapsule_GetPointer(capsule.as_ptr(), std::ptr::null()) };
    if table.is_null() {
        return Err(PyErr::fetch(py));
    }
    // The table lives in NumPy's extension module, which is never unloaded.
    Ok(*TABLE.get_or_init(|| table as usize) as *const *const c_void)
}

fn set_handler(py: Python<'_>, handler: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    let table = api_table(py)?;
    // SAFETY: entry 304 of NumPy's C-API table is PyDataMem_SetHandler
    // (NumPy >= 1.22, checked in `api_table`), a function of this type.
    let set: SetHandlerFn = unsafe { std::mem::transmute(*table.add(SET_HANDLER)) };
    // SAFETY: the GIL is held and `handler` is a live capsule; the result
    // is a new reference (or NULL with an exception set).
    let previous = unsafe { set(handler.as_ptr()) };
    // SAFETY: a new reference from the call above, or NULL.
    unsafe { Bound::from_owned_ptr_or_err(py, previous) }.map(Bound::unbind)
}

fn get_handler(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    let table = api_table(py)?;
    // SAFETY: entry 305 is PyDataMem_GetHandler, a function of this type.
    let get: GetHandlerFn = unsafe { std::mem::transmute(*table.add(GET_HANDLER)) };
    // SAFETY: the GIL is held; the result is a new reference or NULL.
    unsafe { Bound::from_owned_ptr_or_err(py, get()) }
}

unsafe extern "C" fn destroy_capsule(capsule: *mut ffi::PyObject) {
    // SAFETY: called by Python once, with our capsule, under the GIL.
    let block = unsafe { ffi::PyCapsule_GetPointer(capsule, CAPSULE_NAME.as_ptr()) };
    if !block.is_null() {
        // Attached, so that the Python resource the handler holds is let go
        // now rather than at PyO3's next call: the last reference to a
        // resource in a cycle must be gone when the collector looks. While
        // the interpreter finalises (NumPy's last arrays freed at exit),
        // `Py_IsInitialized()` is already 0, so `gil::attach` refuses (the
        // crate is abi3-py311: PyO3's `Py_IsFinalizing` check is compiled
        // out), and `Python::attach` would panic, across this `extern "C"`
        // function, which aborts. The handler is then leaked on purpose:
        // only the handlers still alive at exit, for the process's end.
        crate::gil::attach(|_py| {
            // SAFETY: the pointer is the handler made in `handler_capsule`,
            // released only here, when no array uses it any more.
            unsafe { Nep49Handler::release(block.cast()) }
        });
    }
}

/// The capsule NumPy takes: a core handler over `mr`. A Python resource's
/// exception inside it cannot reach NumPy's caller (NumPy sees NULL and
/// raises its own `MemoryError`): the core logs it on `devmm.mr`, unless it
/// is a `MemoryError` (a refusal for want of memory), and it is dropped.
fn handler_capsule(
    py: Python<'_>,
    mr: Arc<dyn devmm::MemoryResource>,
) -> PyResult<Bound<'_, PyAny>> {
    let stream = crate::stream::resolve_stream(None, mr.device())?;
    let block = Nep49Handler::create(mr, stream, |call| call());
    // SAFETY: the name is a static C string; the destructor releases `block`.
    let capsule =
        unsafe { ffi::PyCapsule_New(block.cast(), CAPSULE_NAME.as_ptr(), Some(destroy_capsule)) };
    if capsule.is_null() {
        // SAFETY: the capsule was not made, so the handler is still ours.
        unsafe { Nep49Handler::release(block) };
    }
    // SAFETY: a new reference, or NULL with an exception set.
    unsafe { Bound::from_owned_ptr_or_err(py, capsule) }
}

/// A NumPy data allocator (NEP 49 handler, a capsule named `mem_handler`)
/// over `mr`, for `devmm.integrations.numpy.install` to make current with
/// `_set_numpy_handler`. `mr` must serve host memory, dereferenceable, and
/// must not allocate through NumPy's own handler (a cycle).
#[pyfunction]
pub(crate) fn _numpy_handler_over(
    py: Python<'_>,
    mr: &Bound<'_, PyMemoryResource>,
) -> PyResult<Py<PyAny>> {
    let rust = resource_of(mr)?;
    Nep49Handler::check_resource(rust.as_ref()).py()?;
    Ok(handler_capsule(py, rust)?.unbind())
}

/// Makes `handler` NumPy's data allocator in the current context
/// (`PyDataMem_SetHandler`); returns the one it replaces.
#[pyfunction]
pub(crate) fn _set_numpy_handler(handler: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    set_handler(handler.py(), handler)
}

/// NumPy's data allocator in the current context (`PyDataMem_GetHandler`).
#[pyfunction]
pub(crate) fn _numpy_handler(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    get_handler(py)
}

/// NumPy's current data allocator (NEP 49) as a devmm resource:
/// experimental. It uses the handler current when it is made.
///
/// `NumpyHandlerMemoryResource(device=None)`: `device` is a host device
/// (`"cpu"`, the default).
///
/// Examples
/// --------
///
/// ```python
/// >>> from devmm.mrs.cpu import NumpyHandlerMemoryResource
/// >>> mr = NumpyHandlerMemoryResource()
/// >>> mr
/// NumpyHandlerMemoryResource(device=cpu:0, handler='default_allocator')
/// >>> mr.deallocate(mr.allocate(64), 64)
///
/// ```
#[pyclass(extends = PyMemoryResource, subclass, name = "NumpyHandlerMemoryResource", module = "devmm.mrs.cpu")]
#[derive(Default)]
pub(crate) struct PyNumpyHandlerMemoryResource;

shipped_new!(PyNumpyHandlerMemoryResource);

#[pymethods]
impl PyNumpyHandlerMemoryResource {
    #[pyo3(signature = (device = None))]
    fn __init__(slf: &Bound<'_, Self>, device: Option<DeviceArg>) -> PyResult<()> {
        let py = slf.py();
        crate::host_resources::host_device("NumpyHandlerMemoryResource", device)?;
        let capsule = get_handler(py)?;
        // SAFETY: NumPy's handler objects are capsules of this name; the
        // call checks and sets an exception otherwise.
        let handler = unsafe { ffi::PyCapsule_GetPointer(capsule.as_ptr(), CAPSULE_NAME.as_ptr()) };
        if handler.is_null() {
            return Err(PyErr::fetch(py));
        }
        let handler = handler as *const DataMemHandler;
        // SAFETY: `handler` points to a PyDataMem_Handler kept alive by `capsule`.
        if unsafe { &*handler }.name() == Nep49Handler::NAME {
            return Err(PyValueError::new_err(
                "NumPy's current handler is devmm's own (integrations.numpy.install is active); \
                 wrapping it would be a cycle",
            ));
        }
        // SAFETY: the capsule (kept by the resource) keeps the handler
        // alive; NumPy's handlers are called from any thread with the GIL,
        // which the scope takes (after shutdown began: no call, no memory).
        let mr = unsafe {
            Nep49Resource::new(handler, Box::new(capsule.unbind()), |call| {
                crate::gil::attach(|_py| call());
            })
        };
        PyMemoryResource::install(slf.as_super(), PyMemoryResource::checked(mr))
    }
}
