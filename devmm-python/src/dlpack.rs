//! `Tensor.__dlpack__`: a core DLPack export wrapped in the PyCapsule the
//! Python protocol names (`"dltensor_versioned"` or `"dltensor"`).
//!
//! A consumer renames the capsule to `"used_dltensor..."` when it takes the
//! export, and then owns the deleter call. A capsule nobody consumed is
//! released by its destructor, which runs the export's deleter.

use std::ffi::{c_void, CStr};

use devmm::dlpack::{DlpackExport, DlpackFlavor, DlpackRequest};
use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;

use crate::error::{discarding_python_errors, to_py_err};
use crate::stream::maybe_detached;

/// A closed buffer is a refusal too (`BufferError`); anything else (a
/// refusal, out of memory, a stream value the device has no use for)
/// converts as everywhere.
fn export_error(err: devmm::Error) -> PyErr {
    match err {
        devmm::Error::BufferClosed { .. } => PyBufferError::new_err(err.to_string()),
        other => to_py_err(other),
    }
}

/// Exports `tensor` for a `__dlpack__(stream=, max_version=, dl_device=, copy=)` call.
pub(crate) fn export_capsule<'py>(
    py: Python<'py>,
    tensor: &devmm::Tensor,
    stream: Option<i64>,
    max_version: Option<(u32, u32)>,
    dl_device: Option<(i32, i32)>,
    copy: Option<bool>,
) -> PyResult<Bound<'py, PyAny>> {
    let mut request = DlpackRequest::new();
    if let Some((major, minor)) = max_version {
        request = request.max_version(major, minor);
    }
    if let Some(stream) = stream {
        request = request.stream(stream);
    }
    if let Some((device_type, device_id)) = dl_device {
        request = request.dl_device(device_type, device_id);
    }
    if let Some(copy) = copy {
        request = request.copy(copy);
    }
    // The stream hand-off may wait on a driver: without the GIL.
    let export =
        maybe_detached(py, tensor.device(), || tensor.to_dlpack(&request)).map_err(export_error)?;
    let flavor = export.flavor();
    let destructor: unsafe extern "C" fn(*mut ffi::PyObject) = match flavor {
        DlpackFlavor::Versioned => destroy_versioned,
        DlpackFlavor::Legacy => destroy_legacy,
    };
    let raw = export.into_raw();
    // SAFETY: `raw` is a live export; the name is a static C string; the
    // destructor matches the flavour.
    let capsule =
        unsafe { ffi::PyCapsule_New(raw, flavor.capsule_name().as_ptr(), Some(destructor)) };
    if capsule.is_null() {
        // SAFETY: the capsule was not made, so the export is still ours.
        drop(unsafe { DlpackExport::from_raw(raw, flavor) });
    }
    // SAFETY: a new reference, or NULL with an exception set.
    unsafe { Bound::from_owned_ptr_or_err(py, capsule) }
}

unsafe extern "C" fn destroy_versioned(capsule: *mut ffi::PyObject) {
    // SAFETY: Python calls a capsule destructor once, with the GIL held.
    unsafe { destroy(capsule, DlpackFlavor::Versioned) }
}

unsafe extern "C" fn destroy_legacy(capsule: *mut ffi::PyObject) {
    // SAFETY: as above.
    unsafe { destroy(capsule, DlpackFlavor::Legacy) }
}

/// Runs the deleter of an export no consumer took. A consumed capsule has
/// been renamed (`used_...`) and its consumer owns the deleter call.
///
/// # Safety
///
/// `capsule` is one of our DLPack capsules of `flavor`, being destroyed,
/// with the GIL held.
unsafe fn destroy(capsule: *mut ffi::PyObject, flavor: DlpackFlavor) {
    let name: &CStr = flavor.capsule_name();
    // SAFETY: `capsule` is a live object; IsValid sets no exception.
    if unsafe { ffi::PyCapsule_IsValid(capsule, name.as_ptr()) } != 1 {
        return;
    }
    // SAFETY: the name was just checked, so GetPointer cannot fail.
    let raw: *mut c_void = unsafe { ffi::PyCapsule_GetPointer(capsule, name.as_ptr()) };
    // SAFETY: an unconsumed capsule still owns the export it was made with
    // in `export_capsule`, and this destructor runs once.
    if let Some(export) = unsafe { DlpackExport::from_raw(raw, flavor) } {
        // The deleter may free memory through a Python resource; keep any
        // exception in flight (capsules die during unwinding too) intact.
        let (mut ty, mut value, mut traceback) = (
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        );
        // SAFETY: the GIL is held; the three out-pointers are valid.
        unsafe { ffi::PyErr_Fetch(&mut ty, &mut value, &mut traceback) };
        // A failed free is logged by the core; nobody raises it.
        discarding_python_errors(|| drop(export));
        // SAFETY: hands back exactly the references PyErr_Fetch gave us.
        unsafe { ffi::PyErr_Restore(ty, value, traceback) };
    }
}
