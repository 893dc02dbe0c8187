//! DLPack 1.3's C exchange API, below `Tensor` and `DeviceBuffer`: the
//! `__dlpack_c_exchange_api__` capsule over the tables `exchange` publishes
//! at module init (its entry points make and read those classes, so they
//! sit above them), and the consumer side, `from_dlpack`'s use of a
//! producer's table instead of a Python-level `__dlpack__` call.

use std::ffi::{c_void, CStr};
use std::sync::{Mutex, OnceLock, PoisonError};

use devmm::dlpack::ffi::{
    DLManagedTensorVersioned, DLPackExchangeAPI, DLPackVersion, DLPACK_EXCHANGE_API_MINOR_VERSION,
    DLPACK_MAJOR_VERSION,
};
use devmm::dlpack::DlpackFlavor;
use pyo3::exceptions::PySystemError;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::error::to_py_err;
use crate::stream::{maybe_detached, resolve_stream, StreamArg};

/// The capsule name DLPack gives the table.
const CAPSULE_NAME: &CStr = c"dlpack_exchange_api";

/// The tables of `Tensor` and `DeviceBuffer`, published by `exchange`.
static PUBLISHED: OnceLock<Published> = OnceLock::new();

struct Published {
    tensor: &'static DLPackExchangeAPI,
    buffer: &'static DLPackExchangeAPI,
}

/// Keeps `tensor` and `buffer` as the tables the classes publish (the
/// first call's; `exchange` calls it once, at module init).
pub(crate) fn publish(tensor: &'static DLPackExchangeAPI, buffer: &'static DLPackExchangeAPI) {
    let _ = PUBLISHED.set(Published { tensor, buffer });
}

fn published() -> PyResult<&'static Published> {
    PUBLISHED
        .get()
        .ok_or_else(|| PySystemError::new_err("devmm's DLPack exchange tables are not published"))
}

/// `Tensor.__dlpack_c_exchange_api__`.
pub(crate) fn tensor_capsule(py: Python<'_>) -> PyResult<Py<PyAny>> {
    capsule(py, published()?.tensor)
}

/// `DeviceBuffer.__dlpack_c_exchange_api__`.
pub(crate) fn buffer_capsule(py: Python<'_>) -> PyResult<Py<PyAny>> {
    capsule(py, published()?.buffer)
}

/// The `__dlpack_c_exchange_api__` capsule over `api`.
fn capsule(py: Python<'_>, api: &'static DLPackExchangeAPI) -> PyResult<Py<PyAny>> {
    let pointer = std::ptr::from_ref(api).cast_mut().cast::<c_void>();
    // SAFETY: `api` is a static that outlives every reader, and nothing
    // writes through the pointer; the name is a static C string; a capsule
    // without a destructor owns nothing.
    let made = unsafe { ffi::PyCapsule_New(pointer, CAPSULE_NAME.as_ptr(), None) };
    // SAFETY: a new reference, or NULL with an exception set.
    unsafe { Bound::from_owned_ptr_or_err(py, made) }.map(Bound::unbind)
}

/// The error a producer's entry point reported by returning -1.
fn reported(py: Python<'_>, entry: &str) -> PyErr {
    PyErr::take(py).unwrap_or_else(|| {
        PySystemError::new_err(format!(
            "the producer's DLPack {entry} failed without setting an error"
        ))
    })
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
