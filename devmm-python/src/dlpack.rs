//! `Tensor.__dlpack__`: a core DLPack export wrapped in the PyCapsule the
//! Python protocol names (`"dltensor_versioned"` or `"dltensor"`).
//!
//! A consumer renames the capsule to `"used_dltensor..."` when it takes the
//! export, and then owns the deleter call. A capsule nobody consumed is
//! released by its destructor, which runs the export's deleter.

use std::ffi::{c_void, CStr};
use std::ptr::NonNull;

use devmm::dlpack::{DlpackExport, DlpackFlavor, DlpackRequest, ExportOwner};
use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt, PyTuple};

use crate::error::{protocol_error, Protocol};
use crate::stream::maybe_detached;

/// An export's failure as the DLPack protocol reports it (every refusal a
/// `BufferError`; see [`Protocol::Dlpack`]).
pub(crate) fn export_error(err: devmm::Error) -> PyErr {
    protocol_error(Protocol::Dlpack, err)
}

/// `obj` as a `T` for the `__dlpack__` keyword `name`; a value of the wrong
/// type or range is a `BufferError` naming the keyword (DLPack's exception
/// for every refusal), never a `TypeError` or `OverflowError`.
fn dlpack_arg<T>(obj: Borrowed<'_, '_, PyAny>, name: &str, expected: &str) -> PyResult<T>
where
    T: for<'a, 'py> FromPyObject<'a, 'py>,
{
    obj.extract::<T>().map_err(|_| refused(obj, name, expected))
}

/// The `BufferError` for a `__dlpack__` keyword `name` given `obj`, in
/// the seed's words.
fn refused(obj: Borrowed<'_, '_, PyAny>, name: &str, expected: &str) -> PyErr {
    let shown = obj
        .repr()
        .map_or_else(|_| "the value".to_owned(), |r| r.to_string());
    PyBufferError::new_err(format!(
        "__dlpack__: {name} must be {expected}, got {shown}"
    ))
}

/// Whether `obj` is a Python int as the DLPack protocol passes one: not a
/// bool (an int to Python, but no handle or version number) and not an
/// object with `__index__` (a NumPy integer, which the seed's
/// `isinstance(x, int)` checks refuse).
fn protocol_int(obj: Borrowed<'_, '_, PyAny>) -> bool {
    obj.is_instance_of::<PyInt>() && !obj.is_instance_of::<PyBool>()
}

/// The consumer's `stream=` of `__dlpack__`.
///
/// Python type: `int`
#[derive(Clone, Copy, Debug)]
pub(crate) struct DlpackStream(pub(crate) i64);

impl<'py> FromPyObject<'_, 'py> for DlpackStream {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        if !protocol_int(obj) {
            return Err(refused(
                obj,
                "stream",
                "None or an int per the DLPack protocol",
            ));
        }
        dlpack_arg(obj, "stream", "a stream handle that fits in 64 bits, or -1").map(DlpackStream)
    }
}

/// The consumer's `max_version=` of `__dlpack__`.
///
/// Python type: `tuple[int, int]`
#[derive(Clone, Copy, Debug)]
pub(crate) struct DlpackVersion(pub(crate) (u32, u32));

impl<'py> FromPyObject<'_, 'py> for DlpackVersion {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        let expected = "None or a (major, minor) pair of non-negative ints";
        // A version past `u32` is read as the largest: any `(1, n)` asks
        // for what devmm speaks, as the seed's comparison of ints does.
        let number = |part: Borrowed<'_, 'py, PyAny>| {
            if !protocol_int(part) {
                return Err(refused(obj, "max_version", expected));
            }
            match part.extract::<u32>() {
                Ok(n) => Ok(n),
                Err(_) if part.ge(0)? => Ok(u32::MAX),
                Err(_) => Err(refused(obj, "max_version", expected)),
            }
        };
        // A tuple, as consumers pass it, read in place (the hot path).
        if let Ok(tuple) = obj.cast::<PyTuple>() {
            if tuple.len() != 2 {
                return Err(refused(obj, "max_version", expected));
            }
            let major = number(tuple.get_borrowed_item(0)?)?;
            return Ok(DlpackVersion((major, number(tuple.get_borrowed_item(1)?)?)));
        }
        // Any other pair, as `major, minor = max_version` unpacks it (a list, say).
        let parts = obj
            .try_iter()
            .and_then(|items| items.take(3).collect::<PyResult<Vec<_>>>())
            .map_err(|_| refused(obj, "max_version", expected))?;
        match &parts[..] {
            [major, minor] => Ok(DlpackVersion((
                number(major.as_borrowed())?,
                number(minor.as_borrowed())?,
            ))),
            _ => Err(refused(obj, "max_version", expected)),
        }
    }
}

/// The consumer's `dl_device=` of `__dlpack__`.
///
/// Python type: `tuple[int, int]`
#[derive(Clone, Copy, Debug)]
pub(crate) struct DlpackDevice(pub(crate) (i32, i32));

impl<'py> FromPyObject<'_, 'py> for DlpackDevice {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        // Any pair will do, as `tuple(dl_device)` reads it (a list, say).
        let expected = "None or a (device_type, device_id) pair of ints";
        match dlpack_arg::<Vec<i32>>(obj, "dl_device", expected)?[..] {
            [device_type, device_id] => Ok(DlpackDevice((device_type, device_id))),
            _ => Err(refused(obj, "dl_device", expected)),
        }
    }
}

/// The consumer's `copy=` of `__dlpack__`.
///
/// Python type: `bool`
#[derive(Clone, Copy, Debug)]
pub(crate) struct DlpackCopy(pub(crate) bool);

impl<'py> FromPyObject<'_, 'py> for DlpackCopy {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        // An int reads as its truth value (`copy=0`), as `if copy:` would.
        if obj.is_instance_of::<PyInt>() {
            return obj.is_truthy().map(DlpackCopy);
        }
        Err(refused(obj, "copy", "True, False or None"))
    }
}

/// Exports `tensor` for a `__dlpack__(stream=, max_version=, dl_device=, copy=)`
/// call on `producer`, which the export keeps alive until a consumer lets
/// go (as the seed's holder keeps its `Tensor`: a weak reference to it
/// stays alive while the memory is shared).
pub(crate) fn export_capsule<'py>(
    producer: &Bound<'py, PyAny>,
    tensor: &devmm::Tensor,
    stream: Option<DlpackStream>,
    max_version: Option<DlpackVersion>,
    dl_device: Option<DlpackDevice>,
    copy: Option<DlpackCopy>,
) -> PyResult<Bound<'py, PyAny>> {
    let request = DlpackRequest {
        max_version: max_version.map(|v| v.0),
        stream: stream.map(|s| s.0),
        dl_device: dl_device.map(|d| d.0),
        copy: copy.map(|c| c.0),
    };
    // The stream hand-off may wait on a driver: without the GIL.
    let py = producer.py();
    let mut export =
        maybe_detached(py, tensor.device(), || tensor.to_dlpack(&request)).map_err(export_error)?;
    hold_producer(&mut export, producer);
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

/// Keeps `producer` alive until `export`'s deleter runs (the exchange
/// API's exports hold their object as `__dlpack__`'s do).
pub(crate) fn hold_producer(export: &mut DlpackExport, producer: &Bound<'_, PyAny>) {
    let held = producer.clone().into_ptr();
    // SAFETY: `held` is a strong reference of our own (never null), and
    // `release_held` gives it back from any thread.
    export.hold(unsafe { ExportOwner::new(NonNull::new_unchecked(held.cast()), release_held) });
}

/// Gives back the reference an export held, on the thread running its
/// deleter (a consumer's, with or without the GIL).
///
/// # Safety
///
/// `held` is a strong reference to a Python object, given back once.
unsafe fn release_held(held: NonNull<c_void>) {
    // After the interpreter is gone there is nothing to give it back to.
    crate::gil::attach(|_py| {
        // SAFETY: the GIL is held; the reference is ours (the contract).
        unsafe { ffi::Py_DECREF(held.as_ptr().cast()) }
    });
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
        drop(export);
        // SAFETY: hands back exactly the references PyErr_Fetch gave us.
        unsafe { ffi::PyErr_Restore(ty, value, traceback) };
    }
}
