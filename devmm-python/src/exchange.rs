//! DLPack 1.3's C exchange API, both directions: the `DLPackExchangeAPI`
//! tables `Tensor` and `DeviceBuffer` publish as `__dlpack_c_exchange_api__`
//! (a `PyCapsule` named `"dlpack_exchange_api"`), and `from_dlpack`'s use of
//! a producer's table instead of a Python-level `__dlpack__` call.
//!
//! Every entry point is called from C: it never unwinds (a panic becomes a
//! Python error), reports failure as -1 with the Python error set (the
//! allocator through the caller's `SetError`), and attaches to the
//! interpreter through [`crate::gil::attach`], which asks the interpreter
//! whether this thread holds the GIL. The rules are the core's
//! ([`devmm::dlpack::allocate_like`], [`devmm::Tensor::to_dlpack_no_sync`],
//! ...); this module converts and holds references.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::sync::{Mutex, PoisonError};

use devmm::dlpack::ffi::{
    DLManagedTensorVersioned, DLPackExchangeAPI, DLPackExchangeAPIHeader, DLPackVersion, DLTensor,
    DLPACK_EXCHANGE_API_MINOR_VERSION, DLPACK_MAJOR_VERSION,
};
use devmm::dlpack::DlpackFlavor;
use pyo3::exceptions::{PyRuntimeError, PySystemError, PyTypeError};
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::buffer::PyDeviceBuffer;
use crate::dlpack::{export_error, hold_producer};
use crate::error::{to_py_err, type_name};
use crate::stream::{maybe_detached, resolve_stream, StreamArg};
use crate::tensor::PyTensor;

/// The capsule name DLPack gives the table.
const CAPSULE_NAME: &CStr = c"dlpack_exchange_api";

/// A table of devmm's entry points; `dltensor_from_py_object_no_sync` is
/// the one that differs between the types.
const fn table(
    dltensor: Option<devmm::dlpack::ffi::DLPackDLTensorFromPyObjectNoSync>,
) -> DLPackExchangeAPI {
    DLPackExchangeAPI {
        header: DLPackExchangeAPIHeader {
            version: DLPackVersion {
                major: DLPACK_MAJOR_VERSION,
                minor: DLPACK_EXCHANGE_API_MINOR_VERSION,
            },
            prev_api: std::ptr::null_mut(),
        },
        managed_tensor_allocator: Some(managed_tensor_allocator),
        managed_tensor_from_py_object_no_sync: Some(managed_tensor_from_py_object_no_sync),
        managed_tensor_to_py_object_no_sync: Some(managed_tensor_to_py_object_no_sync),
        dltensor_from_py_object_no_sync: dltensor,
        current_work_stream: Some(current_work_stream),
    }
}

/// `Tensor`'s table.
pub(crate) static TENSOR_API: DLPackExchangeAPI = table(Some(dltensor_from_py_object_no_sync));

/// `DeviceBuffer`'s table. A buffer's 1-D shape is made per export, so
/// there are no dims to lend for a borrowed `DLTensor`: that optional
/// entry is NULL, as DLPack allows, and consumers take an export instead.
pub(crate) static BUFFER_API: DLPackExchangeAPI = table(None);

/// The `__dlpack_c_exchange_api__` capsule over `api`.
pub(crate) fn capsule(py: Python<'_>, api: &'static DLPackExchangeAPI) -> PyResult<Py<PyAny>> {
    let pointer = std::ptr::from_ref(api).cast_mut().cast::<c_void>();
    // SAFETY: `api` is a static that outlives every reader, and nothing
    // writes through the pointer; the name is a static C string; a capsule
    // without a destructor owns nothing.
    let made = unsafe { ffi::PyCapsule_New(pointer, CAPSULE_NAME.as_ptr(), None) };
    // SAFETY: a new reference, or NULL with an exception set.
    unsafe { Bound::from_owned_ptr_or_err(py, made) }.map(Bound::unbind)
}

/// Runs `f` attached to the interpreter, as a C entry point must: 0 when
/// it succeeds, -1 with the Python error set when it fails or panics.
fn guarded(entry: &str, f: impl FnOnce(Python<'_>) -> PyResult<()>) -> c_int {
    let ran = catch_unwind(AssertUnwindSafe(|| {
        crate::gil::attach(|py| {
            let outcome = catch_unwind(AssertUnwindSafe(|| f(py))).unwrap_or_else(|panic| {
                Err(PyRuntimeError::new_err(format!(
                    "devmm's DLPack {entry} failed unexpectedly ({}); please report it",
                    panic_message(panic.as_ref())
                )))
            });
            outcome.map_err(|err| err.restore(py)).is_ok()
        })
    }));
    match ran {
        Ok(Some(true)) => 0,
        // An interpreter already finalised has nowhere to put an error.
        _ => -1,
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic")
}

/// The error a producer's entry point reported by returning -1.
fn reported(py: Python<'_>, entry: &str) -> PyErr {
    PyErr::take(py).unwrap_or_else(|| {
        PySystemError::new_err(format!(
            "the producer's DLPack {entry} failed without setting an error"
        ))
    })
}

/// The devmm tensor `obj` (a `Tensor`, or a `DeviceBuffer` as its bytes).
fn tensor_of(obj: &Bound<'_, PyAny>) -> PyResult<devmm::Tensor> {
    if let Ok(tensor) = obj.cast::<PyTensor>() {
        return Ok(tensor.get().tensor.clone());
    }
    if let Ok(buffer) = obj.cast::<PyDeviceBuffer>() {
        return devmm::Tensor::bytes_of(std::sync::Arc::clone(&buffer.get().buffer))
            .map_err(export_error);
    }
    Err(PyTypeError::new_err(format!(
        "devmm's DLPack exchange API exports devmm Tensor and DeviceBuffer objects, got {}; \
         use the table of the object's own type",
        type_name(obj)
    )))
}

/// A non-null out-pointer of an entry point, or the `ValueError` naming it.
fn out_ptr<T>(out: *mut T, entry: &str) -> PyResult<NonNull<T>> {
    NonNull::new(out).ok_or_else(|| {
        pyo3::exceptions::PyValueError::new_err(format!(
            "{entry} was called with a NULL out pointer"
        ))
    })
}

unsafe extern "C" fn managed_tensor_allocator(
    prototype: *mut DLTensor,
    out: *mut *mut DLManagedTensorVersioned,
    error_ctx: *mut c_void,
    set_error: Option<unsafe extern "C" fn(*mut c_void, *const c_char, *const c_char)>,
) -> c_int {
    let made = catch_unwind(AssertUnwindSafe(|| {
        let Some(prototype) = NonNull::new(prototype) else {
            return Err(devmm::Error::Dlpack {
                reason: "managed_tensor_allocator was called with a NULL prototype".into(),
            });
        };
        let Some(out) = NonNull::new(out) else {
            return Err(devmm::Error::Dlpack {
                reason: "managed_tensor_allocator was called with a NULL out pointer".into(),
            });
        };
        // SAFETY: the caller's prototype is a live DLTensor whose shape
        // holds `ndim` values (the DLPack contract).
        let export = unsafe { devmm::dlpack::allocate_like(prototype.as_ref()) }?;
        // SAFETY: the caller's out-pointer is writable; the export is
        // versioned, and is the caller's to delete from here on.
        unsafe { out.as_ptr().write(export.into_raw().cast()) };
        Ok(())
    }));
    let (kind, message) = match made {
        Ok(Ok(())) => return 0,
        // The Python exception the error maps to everywhere else names the kind.
        Ok(Err(err)) => {
            let message = err.to_string();
            let kind = crate::gil::attach(|py| {
                to_py_err(err)
                    .get_type(py)
                    .name()
                    .map_or_else(|_| "RuntimeError".to_owned(), |n| n.to_string())
            });
            (kind.unwrap_or_else(|| "RuntimeError".to_owned()), message)
        }
        Err(panic) => (
            "RuntimeError".to_owned(),
            format!(
                "devmm's DLPack managed_tensor_allocator failed unexpectedly ({}); please report it",
                panic_message(panic.as_ref())
            ),
        ),
    };
    if let Some(set_error) = set_error {
        let text = |s: String| CString::new(s.replace('\0', " ")).unwrap_or_default();
        let (kind, message) = (text(kind), text(message));
        // SAFETY: the caller's callback and context, called once with two
        // NUL-terminated strings that outlive the call. A panic in it
        // would be the caller's; none crosses back out of this frame.
        let _ = catch_unwind(|| unsafe { set_error(error_ctx, kind.as_ptr(), message.as_ptr()) });
    }
    -1
}

unsafe extern "C" fn managed_tensor_from_py_object_no_sync(
    py_object: *mut c_void,
    out: *mut *mut DLManagedTensorVersioned,
) -> c_int {
    guarded("managed_tensor_from_py_object_no_sync", |py| {
        let out = out_ptr(out, "managed_tensor_from_py_object_no_sync")?;
        // SAFETY: the caller passes a live object and holds the GIL.
        let obj = unsafe { Bound::from_borrowed_ptr_or_err(py, py_object.cast()) }?;
        let mut export = tensor_of(&obj)?.to_dlpack_no_sync().map_err(export_error)?;
        hold_producer(&mut export, &obj);
        // SAFETY: a writable out-pointer (checked non-null); the versioned
        // export is the caller's to delete from here on.
        unsafe { out.as_ptr().write(export.into_raw().cast()) };
        Ok(())
    })
}

unsafe extern "C" fn managed_tensor_to_py_object_no_sync(
    tensor: *mut DLManagedTensorVersioned,
    out_py_object: *mut *mut c_void,
) -> c_int {
    guarded("managed_tensor_to_py_object_no_sync", |py| {
        // SAFETY: the caller hands over a live versioned struct (or NULL,
        // refused); the core deletes it exactly once, at once if refused.
        let imported =
            unsafe { devmm::Tensor::from_dlpack(tensor.cast(), DlpackFlavor::Versioned) }
                .map_err(to_py_err)?;
        let out = out_ptr(out_py_object, "managed_tensor_to_py_object_no_sync")?;
        let made = Bound::new(py, PyTensor::imported(py, imported)?)?;
        // SAFETY: a writable out-pointer; the new reference is the caller's.
        unsafe { out.as_ptr().write(made.into_ptr().cast()) };
        Ok(())
    })
}

unsafe extern "C" fn dltensor_from_py_object_no_sync(
    py_object: *mut c_void,
    out: *mut DLTensor,
) -> c_int {
    guarded("dltensor_from_py_object_no_sync", |py| {
        let out = out_ptr(out, "dltensor_from_py_object_no_sync")?;
        // SAFETY: the caller passes a live object and holds the GIL.
        let obj = unsafe { Bound::from_borrowed_ptr_or_err(py, py_object.cast()) }?;
        let tensor = obj.cast::<PyTensor>()?;
        // The dims are lent from the tensor inside the (frozen, unmoving)
        // Python object, which the caller keeps alive while it reads them.
        let view = tensor.get().tensor.dl_tensor_view().map_err(export_error)?;
        // SAFETY: the caller's DLTensor is writable.
        unsafe { out.as_ptr().write(view) };
        Ok(())
    })
}

unsafe extern "C" fn current_work_stream(
    device_type: i32,
    device_id: i32,
    out_current_stream: *mut *mut c_void,
) -> c_int {
    let found = catch_unwind(|| devmm::dlpack::current_work_stream(device_type, device_id));
    match (found, NonNull::new(out_current_stream)) {
        (Ok(Ok(handle)), Some(out)) => {
            // SAFETY: the caller's out-pointer is writable. NULL: no stream.
            unsafe {
                out.as_ptr()
                    .write(handle.map_or(std::ptr::null_mut(), |h| h as *mut c_void))
            };
            0
        }
        (found, _) => guarded("current_work_stream", |_py| match found {
            Ok(Err(err)) => Err(to_py_err(err)),
            Ok(Ok(_)) => Err(pyo3::exceptions::PyValueError::new_err(
                "current_work_stream was called with a NULL out pointer",
            )),
            Err(panic) => Err(PyRuntimeError::new_err(format!(
                "devmm's DLPack current_work_stream failed unexpectedly ({}); please report it",
                panic_message(panic.as_ref())
            ))),
        }),
    }
}

/// How many producer types [`producer_api`] remembers the answer for.
const REMEMBERED_TYPES: usize = 32;

/// The answers of [`producer_api`] per type, by the type's address; each
/// type is kept alive (a strong reference never given back), so its
/// address cannot name another type later. DLPack lets a consumer cache
/// the table per type.
static REMEMBERED: Mutex<Vec<(usize, Option<&'static DLPackExchangeAPI>)>> = Mutex::new(Vec::new());

/// The exchange table `type(obj)` publishes, when it is one devmm reads:
/// a `"dlpack_exchange_api"` capsule whose header says DLPack 1.x with x
/// at least 3, with an export entry. `None` sends `from_dlpack` to
/// `__dlpack__`. The answer is remembered per type: a failed attribute
/// lookup builds an `AttributeError`, which every NumPy import would pay.
pub(crate) fn producer_api(obj: &Bound<'_, PyAny>) -> Option<&'static DLPackExchangeAPI> {
    let ty = obj.get_type();
    let key = ty.as_ptr() as usize;
    let remember = || REMEMBERED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(&(_, api)) = remember().iter().find(|(seen, _)| *seen == key) {
        return api;
    }
    // Looked up unlocked: the lookup may run Python code (a metaclass's
    // `__getattr__`) that imports through here again.
    let api = table_of(&ty);
    let mut remembered = remember();
    let known = remembered.iter().any(|(seen, _)| *seen == key);
    if !known && remembered.len() < REMEMBERED_TYPES {
        // Kept alive for good, so the address stays this type's.
        let _ = ty.into_ptr();
        remembered.push((key, api));
    }
    api
}

/// The table `ty` publishes, looked up (see [`producer_api`]).
fn table_of(ty: &Bound<'_, PyType>) -> Option<&'static DLPackExchangeAPI> {
    let found = ty
        .getattr(intern!(ty.py(), "__dlpack_c_exchange_api__"))
        .ok()?;
    // SAFETY: a live object; IsValid sets no exception, and with the name
    // checked GetPointer cannot fail.
    let api = unsafe {
        if ffi::PyCapsule_IsValid(found.as_ptr(), CAPSULE_NAME.as_ptr()) != 1 {
            return None;
        }
        ffi::PyCapsule_GetPointer(found.as_ptr(), CAPSULE_NAME.as_ptr())
    };
    // SAFETY: a table DLPack says lives as long as the process; only the
    // header is read before its version is checked.
    let api = unsafe { api.cast::<DLPackExchangeAPI>().as_ref() }?;
    let DLPackVersion { major, minor } = api.header.version;
    (major == DLPACK_MAJOR_VERSION
        && minor >= DLPACK_EXCHANGE_API_MINOR_VERSION
        && api.managed_tensor_from_py_object_no_sync.is_some())
    .then_some(api)
}

/// Imports `obj` through its type's exchange table `api`: the export
/// entry, with no Python-level call, then `stream` (the device's default
/// when `None`) ordered after the producer's current work stream, since
/// exchange exports leave ordering to the consumer.
pub(crate) fn import(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    api: &'static DLPackExchangeAPI,
    stream: Option<StreamArg>,
) -> PyResult<devmm::Tensor> {
    let export = api
        .managed_tensor_from_py_object_no_sync
        .ok_or_else(|| PySystemError::new_err("the exchange table has no export entry"))?;
    let mut raw: *mut DLManagedTensorVersioned = std::ptr::null_mut();
    // SAFETY: `obj` is an object of the type the table came from, alive,
    // with the GIL held; `raw` is a valid out-pointer.
    if unsafe { export(obj.as_ptr().cast(), &mut raw) } != 0 {
        return Err(reported(py, "managed_tensor_from_py_object_no_sync"));
    }
    if raw.is_null() {
        return Err(PySystemError::new_err(
            "the producer's DLPack managed_tensor_from_py_object_no_sync returned no tensor",
        ));
    }
    // SAFETY: the producer's struct, now ours; DLPack asks the major be
    // checked before anything else is read.
    let dl_device =
        unsafe { ((*raw).version.major == DLPACK_MAJOR_VERSION).then(|| (*raw).dl_tensor.device) };
    let device =
        dl_device.and_then(|d| devmm::Device::from_dlpack(d.device_type, d.device_id).ok());
    let ours = match device
        .map(|device| resolve_stream(stream, device))
        .transpose()
    {
        Ok(ours) => ours,
        Err(err) => {
            // SAFETY: ours, live, deleted once here.
            unsafe {
                if let Some(deleter) = (*raw).deleter {
                    deleter(raw);
                }
            }
            return Err(err);
        }
    };
    // SAFETY: the struct is ours alone; the core deletes it exactly once
    // (at once when it refuses it: a device it cannot read, say).
    let tensor = unsafe {
        match &ours {
            Some(ours) => devmm::Tensor::from_dlpack_on(raw.cast(), DlpackFlavor::Versioned, ours),
            None => devmm::Tensor::from_dlpack(raw.cast(), DlpackFlavor::Versioned),
        }
    }
    .map_err(to_py_err)?;
    if let (Some(ours), Some(d), Some(current)) = (&ours, dl_device, api.current_work_stream) {
        if tensor.device().ty() != devmm::DeviceType::Cpu {
            let mut producer: *mut c_void = std::ptr::null_mut();
            // SAFETY: the producer's entry, with a valid out-pointer.
            if unsafe { current(d.device_type, d.device_id, &mut producer) } != 0 {
                return Err(reported(py, "current_work_stream"));
            }
            let producer = producer as usize;
            if producer != ours.handle() {
                maybe_detached(py, tensor.device(), || ours.wait_raw(producer))
                    .map_err(to_py_err)?;
            }
        }
    }
    Ok(tensor)
}
