//! DLPack 1.3's C exchange API, the producer side: the `DLPackExchangeAPI`
//! tables `Tensor` and `DeviceBuffer` publish as `__dlpack_c_exchange_api__`
//! (a `PyCapsule` named `"dlpack_exchange_api"`, made in `exchange_api`,
//! to which [`publish`] hands the tables at module init). `from_dlpack`'s
//! use of a producer's table is `exchange_api`'s.
//!
//! Every entry point is called from C: it never unwinds (a panic becomes a
//! Python error), reports failure as -1 with the Python error set (the
//! allocator through the caller's `SetError`), and attaches to the
//! interpreter through [`crate::gil::attach`], which asks the interpreter
//! whether this thread holds the GIL. The rules are the core's
//! ([`devmm::dlpack::allocate_like`], [`devmm::Tensor::to_dlpack_no_sync`],
//! ...); this module converts and holds references.

use std::ffi::{c_char, c_int, c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;

use devmm::dlpack::ffi::{
    DLManagedTensorVersioned, DLPackExchangeAPI, DLPackExchangeAPIHeader, DLPackVersion, DLTensor,
    DLPACK_EXCHANGE_API_MINOR_VERSION, DLPACK_MAJOR_VERSION,
};
use devmm::dlpack::DlpackFlavor;
use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;

use crate::buffer::PyDeviceBuffer;
use crate::dlpack::{export_error, hold_producer};
use crate::error::to_py_err;
use crate::expected::type_name;
use crate::tensor::PyTensor;

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
static TENSOR_API: DLPackExchangeAPI = table(Some(dltensor_from_py_object_no_sync));

/// `DeviceBuffer`'s table. A buffer's 1-D shape is made per export, so
/// there are no dims to lend for a borrowed `DLTensor`: that optional
/// entry is NULL, as DLPack allows, and consumers take an export instead.
static BUFFER_API: DLPackExchangeAPI = table(None);

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
        let made = Bound::new(py, PyTensor::imported(imported))?;
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

/// Publishes the tables for `Tensor`'s and `DeviceBuffer`'s
/// `__dlpack_c_exchange_api__`: called once at module init, before either
/// class is made.
pub(crate) fn publish() {
    crate::exchange_api::publish(&TENSOR_API, &BUFFER_API);
}
