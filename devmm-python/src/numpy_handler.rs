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

use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use pyo3::exceptions::{PyImportError, PyRuntimeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use pyo3::{PyTraverseError, PyVisit};

use crate::error::IntoPyResult;
use crate::resource::{resource_of, PyMemoryResource};

const CAPSULE_NAME: &CStr = c"mem_handler";
const HANDLER_NAME: &[u8] = b"devmm";
const SET_HANDLER: usize = 304;
const GET_HANDLER: usize = 305;

/// NumPy's `PyDataMemAllocator` (version 1).
#[repr(C)]
struct DataMemAllocator {
    ctx: *mut c_void,
    malloc: unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void,
    calloc: unsafe extern "C" fn(*mut c_void, usize, usize) -> *mut c_void,
    realloc: unsafe extern "C" fn(*mut c_void, *mut c_void, usize) -> *mut c_void,
    free: unsafe extern "C" fn(*mut c_void, *mut c_void, usize),
}

/// NumPy's `PyDataMem_Handler`.
#[repr(C)]
struct DataMemHandler {
    name: [c_char; 127],
    version: u8,
    allocator: DataMemAllocator,
}

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

/// The state behind our handler: the resource and the size of every live
/// block, since NumPy's `realloc` does not say how big the old block was.
struct HandlerContext {
    mr: Arc<dyn devmm::MemoryResource>,
    stream: devmm::Stream,
    sizes: Mutex<HashMap<usize, usize>>,
}

impl HandlerContext {
    fn sizes(&self) -> MutexGuard<'_, HashMap<usize, usize>> {
        // One insert or remove per update: never left half-done.
        self.sizes.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn allocate(&self, nbytes: usize) -> *mut c_void {
        // NumPy treats NULL as failure, so even empty arrays get a byte.
        let nbytes = nbytes.max(1);
        // NumPy gets NULL and raises its own MemoryError; the cause is lost.
        match contained(|| self.mr.allocate(nbytes, &self.stream)) {
            Ok(ptr) if !ptr.is_null() => {
                self.sizes().insert(ptr.addr(), nbytes);
                ptr.as_host_ptr()
            }
            _ => std::ptr::null_mut(),
        }
    }

    fn free(&self, ptr: *mut c_void) {
        if ptr.is_null() {
            return;
        }
        // Bound first so the table's lock is released before `deallocate`,
        // which may call back into NumPy (and so into this handler).
        let removed = self.sizes().remove(&(ptr as usize));
        if let Some(nbytes) = removed {
            // NumPy's free cannot fail: an error is logged, not raised.
            let result = contained(|| {
                // SAFETY: `ptr` is live in our table, so it came from
                // `mr.allocate(nbytes)` and has not been freed.
                unsafe {
                    self.mr
                        .deallocate(devmm::DevicePtr::from_host_ptr(ptr), nbytes, &self.stream)
                }
            });
            if let Err(error) = result {
                tracing::error!(target: "devmm::numpy", %error, "NumPy handler free failed");
            }
        }
    }
}

/// Runs a resource call on behalf of NumPy's C allocator, which can only
/// be told "failed": a devmm error carrying a Python exception drops that
/// exception, and a panic (a bug) is stopped here, since unwinding into C
/// would abort the process.
fn contained<T>(call: impl FnOnce() -> devmm::Result<T>) -> devmm::Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)).unwrap_or_else(|_| {
        Err(devmm::Error::InvalidArgument {
            reason: "a devmm resource panicked inside NumPy's allocator; please report it".into(),
        })
    })
}

/// The capsule's payload: NumPy's struct first, so the capsule pointer is
/// both the `PyDataMem_Handler*` NumPy reads and the block we free.
#[repr(C)]
struct HandlerBlock {
    handler: DataMemHandler,
    context: HandlerContext,
}

unsafe extern "C" fn handler_malloc(ctx: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: `ctx` is the context of a live HandlerBlock (the capsule, and
    // so the block, outlives every array NumPy allocated through it).
    let ctx = unsafe { &*(ctx as *const HandlerContext) };
    ctx.allocate(size)
}

unsafe extern "C" fn handler_calloc(ctx: *mut c_void, nelem: usize, elsize: usize) -> *mut c_void {
    let Some(size) = nelem.checked_mul(elsize) else {
        return std::ptr::null_mut();
    };
    // SAFETY: as in `handler_malloc`.
    let ctx = unsafe { &*(ctx as *const HandlerContext) };
    let ptr = ctx.allocate(size);
    if !ptr.is_null() {
        // SAFETY: the block is host memory (checked at install) of at least
        // `size` bytes, just allocated and not shared yet.
        unsafe { std::ptr::write_bytes(ptr.cast::<u8>(), 0, size) };
    }
    ptr
}

unsafe extern "C" fn handler_realloc(
    ctx: *mut c_void,
    ptr: *mut c_void,
    size: usize,
) -> *mut c_void {
    // SAFETY: as in `handler_malloc`.
    let ctx = unsafe { &*(ctx as *const HandlerContext) };
    let old = if ptr.is_null() {
        0
    } else {
        match ctx.sizes().get(&(ptr as usize)) {
            Some(&n) => n,
            None => return std::ptr::null_mut(),
        }
    };
    let new = ctx.allocate(size);
    if !new.is_null() && !ptr.is_null() {
        // SAFETY: both blocks are live host memory of at least the copied
        // length, and distinct allocations cannot overlap.
        unsafe { std::ptr::copy_nonoverlapping(ptr.cast::<u8>(), new.cast::<u8>(), old.min(size)) };
        ctx.free(ptr);
    }
    new
}

unsafe extern "C" fn handler_free(ctx: *mut c_void, ptr: *mut c_void, _size: usize) {
    // SAFETY: as in `handler_malloc`.
    let ctx = unsafe { &*(ctx as *const HandlerContext) };
    ctx.free(ptr);
}

unsafe extern "C" fn destroy_capsule(capsule: *mut ffi::PyObject) {
    // SAFETY: called by Python once, with our capsule, under the GIL.
    let block = unsafe { ffi::PyCapsule_GetPointer(capsule, CAPSULE_NAME.as_ptr()) };
    if !block.is_null() {
        // SAFETY: the pointer is the Box made in `handler_capsule`, released
        // only here.
        drop(unsafe { Box::from_raw(block.cast::<HandlerBlock>()) });
    }
}

fn handler_capsule(
    py: Python<'_>,
    mr: Arc<dyn devmm::MemoryResource>,
) -> PyResult<Bound<'_, PyAny>> {
    let stream = crate::stream::resolve_stream(None, mr.device())?;
    let mut name = [0 as c_char; 127];
    for (dst, &src) in name.iter_mut().zip(HANDLER_NAME) {
        *dst = src as c_char;
    }
    let block = Box::into_raw(Box::new(HandlerBlock {
        handler: DataMemHandler {
            name,
            version: 1,
            allocator: DataMemAllocator {
                ctx: std::ptr::null_mut(),
                malloc: handler_malloc,
                calloc: handler_calloc,
                realloc: handler_realloc,
                free: handler_free,
            },
        },
        context: HandlerContext {
            mr,
            stream,
            sizes: Mutex::default(),
        },
    }));
    // SAFETY: `block` is a fresh, valid Box pointer; the context field lives
    // as long as the block.
    unsafe { (*block).handler.allocator.ctx = std::ptr::addr_of_mut!((*block).context).cast() };
    // SAFETY: the name is a static C string; the destructor frees `block`.
    let capsule =
        unsafe { ffi::PyCapsule_New(block.cast(), CAPSULE_NAME.as_ptr(), Some(destroy_capsule)) };
    if capsule.is_null() {
        // SAFETY: the capsule was not made, so the block is still ours.
        drop(unsafe { Box::from_raw(block) });
    }
    // SAFETY: a new reference, or NULL with an exception set.
    unsafe { Bound::from_owned_ptr_or_err(py, capsule) }
}

/// Makes NumPy allocate array data through a devmm resource until
/// `uninstall()` or the end of the `with` block, which restore the handler
/// that was current before. Made by `devmm.integrations.numpy.install`.
#[pyclass(name = "NumpyInstaller", module = "devmm.integrations.numpy")]
pub(crate) struct PyNumpyInstaller {
    mr: Py<PyMemoryResource>,
    /// The handler this installer made current, to tell whether it still
    /// is; dropped on uninstall, so that the handler (and the resource it
    /// holds) lives on only in the arrays that use it.
    capsule: Option<Py<PyAny>>,
    previous: Option<Py<PyAny>>,
}

#[pymethods]
impl PyNumpyInstaller {
    /// The resource NumPy allocates through.
    #[getter]
    fn mr(&self, py: Python<'_>) -> Py<PyMemoryResource> {
        self.mr.clone_ref(py)
    }

    /// Whether the handler is still installed by this installer.
    #[getter]
    fn installed(&self) -> bool {
        self.previous.is_some()
    }

    /// Restores NumPy's previous handler. Idempotent. Arrays allocated
    /// meanwhile keep using (and keep alive) the devmm resource until freed.
    /// Raises `RuntimeError` while a handler installed later is current:
    /// restoring ours would bring back a handler older than that one.
    fn uninstall(&mut self, py: Python<'_>) -> PyResult<()> {
        let (Some(previous), Some(capsule)) = (&self.previous, &self.capsule) else {
            return Ok(());
        };
        if !get_handler(py)?.is(capsule.bind(py)) {
            return Err(PyRuntimeError::new_err(
                "uninstall NumPy handlers in reverse order of install",
            ));
        }
        set_handler(py, previous.bind(py))?;
        self.previous = None;
        self.capsule = None;
        Ok(())
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.mr)?;
        visit.call(&self.capsule)?;
        visit.call(&self.previous)
    }

    fn __clear__(&mut self) {
        // Still installed, NumPy's current handler keeps the capsule; the
        // references this object held are just dropped.
        self.capsule = None;
        self.previous = None;
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&mut self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.uninstall(py)?;
        Ok(false)
    }
}

/// Installs `mr` as NumPy's data allocator (NEP 49) in the current context;
/// returns the installer that undoes it. `mr` must serve host memory.
#[pyfunction]
pub(crate) fn install_numpy_handler(
    py: Python<'_>,
    mr: &Bound<'_, PyMemoryResource>,
) -> PyResult<PyNumpyInstaller> {
    let rust = resource_of(mr)?;
    if !rust.device().ty().is_host_accessible() {
        return Err(PyValueError::new_err(format!(
            "NumPy dereferences its data on the host; a resource on {} cannot back NumPy arrays",
            rust.device()
        )));
    }
    devmm::check_dereferenceable(rust.as_ref(), "NumPy's allocator (NEP 49)").py()?;
    if devmm::resource_chain(rust.as_ref()).contains(NumpyHandlerResource::NAME) {
        return Err(PyValueError::new_err(
            "installing a resource that allocates through NumPy's own handler as NumPy's handler \
             is a cycle; wrap another resource",
        ));
    }
    let capsule = handler_capsule(py, rust)?;
    let previous = set_handler(py, &capsule)?;
    Ok(PyNumpyInstaller {
        mr: mr.clone().unbind(),
        capsule: Some(capsule.unbind()),
        previous: Some(previous),
    })
}

/// A devmm resource over the NumPy handler that was current when it was made.
struct NumpyHandlerResource {
    /// Holds the handler struct `handler` points into.
    _capsule: Py<PyAny>,
    handler: usize,
    name: String,
}

impl NumpyHandlerResource {
    const NAME: &'static str = "NumpyHandlerMemoryResource";
    /// What malloc promises on the platforms NumPy supports.
    const ALIGNMENT: usize = 16;

    fn allocator(&self) -> &DataMemAllocator {
        // SAFETY: `handler` points into the capsule we hold a reference to.
        unsafe { &(*(self.handler as *const DataMemHandler)).allocator }
    }
}

impl fmt::Debug for NumpyHandlerResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}(handler={:?})", Self::NAME, self.name)
    }
}

impl devmm::MemoryResource for NumpyHandlerResource {
    fn allocate(&self, nbytes: usize, _stream: &devmm::Stream) -> devmm::Result<devmm::DevicePtr> {
        if nbytes == 0 {
            return Ok(devmm::DevicePtr::NULL);
        }
        let allocator = self.allocator();
        // NumPy's default handler keeps a cache that assumes the GIL.
        let ptr = Python::try_attach(|_py| {
            // SAFETY: the allocator and its ctx live as long as the capsule.
            unsafe { (allocator.malloc)(allocator.ctx, nbytes) }
        })
        .unwrap_or(std::ptr::null_mut());
        let ptr = devmm::DevicePtr::from_host_ptr(ptr);
        if ptr.is_null() {
            return Err(devmm::Error::OutOfMemory {
                device: devmm::Device::CPU,
                nbytes,
                chain: format!("{self:?}"),
                detail: Some("the NumPy handler returned NULL".into()),
            });
        }
        if !ptr.is_aligned(Self::ALIGNMENT) {
            // SAFETY: just allocated by this allocator with this size.
            Python::try_attach(|_py| unsafe {
                (allocator.free)(allocator.ctx, ptr.as_host_ptr(), nbytes)
            });
            return Err(devmm::Error::Misuse {
                kind: devmm::MisuseKind::Misaligned {
                    promised: Self::ALIGNMENT,
                },
                ptr,
                nbytes,
                device: devmm::Device::CPU,
                resource: format!("{self:?}"),
            });
        }
        Ok(ptr)
    }

    unsafe fn deallocate(
        &self,
        ptr: devmm::DevicePtr,
        nbytes: usize,
        _stream: &devmm::Stream,
    ) -> devmm::Result<()> {
        if ptr.is_null() {
            return Ok(());
        }
        let allocator = self.allocator();
        // After interpreter shutdown began NumPy's allocator is gone with
        // it; the block is left to the exiting process.
        Python::try_attach(|_py| {
            // SAFETY: the caller guarantees `ptr` came from `allocate(nbytes)`.
            unsafe { (allocator.free)(allocator.ctx, ptr.as_host_ptr(), nbytes) }
        });
        Ok(())
    }

    fn device(&self) -> devmm::Device {
        devmm::Device::CPU
    }

    fn guaranteed_alignment(&self) -> usize {
        Self::ALIGNMENT
    }

    fn available_memory(&self) -> devmm::Result<devmm::MemoryInfo> {
        devmm::runtime_for(devmm::Device::CPU)?.memory_info(devmm::Device::CPU)
    }

    fn dereferenceable(&self) -> bool {
        true
    }
}

// SAFETY: the handler pointer is only read, and NumPy handlers are called
// from any thread (we take the GIL around every call).
unsafe impl Send for NumpyHandlerResource {}
// SAFETY: as for Send: shared access only reads the pointer.
unsafe impl Sync for NumpyHandlerResource {}

/// NumPy's current data allocator (NEP 49) as a devmm resource:
/// experimental. It uses the handler current when it is made.
#[pyclass(extends = PyMemoryResource, name = "NumpyHandlerMemoryResource", module = "devmm")]
pub(crate) struct PyNumpyHandlerMemoryResource;

#[pymethods]
impl PyNumpyHandlerMemoryResource {
    #[new]
    fn py_new(py: Python<'_>) -> PyResult<(Self, PyMemoryResource)> {
        let capsule = get_handler(py)?;
        // SAFETY: NumPy's handler objects are capsules of this name; the
        // call checks and sets an exception otherwise.
        let handler = unsafe { ffi::PyCapsule_GetPointer(capsule.as_ptr(), CAPSULE_NAME.as_ptr()) };
        if handler.is_null() {
            return Err(PyErr::fetch(py));
        }
        // SAFETY: `handler` points to a PyDataMem_Handler kept alive by `capsule`.
        let raw_name = unsafe { &(*(handler as *const DataMemHandler)).name };
        let name: String = raw_name
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8 as char)
            .collect();
        if name.as_bytes() == HANDLER_NAME {
            return Err(PyValueError::new_err(
                "NumPy's current handler is devmm's own (integrations.numpy.install is active); \
                 wrapping it would be a cycle",
            ));
        }
        let mr = NumpyHandlerResource {
            _capsule: capsule.unbind(),
            handler: handler as usize,
            name,
        };
        Ok((PyNumpyHandlerMemoryResource, PyMemoryResource::checked(mr)))
    }
}
