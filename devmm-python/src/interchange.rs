//! Interchange beyond `__dlpack__`: DLPack import (`from_dlpack`), the
//! buffer protocol over host memory, and the two array-interface
//! dictionaries. The rules (what each interface may describe, type
//! strings, import ownership) live in the core; this module converts.

use std::ffi::{c_int, c_void, CStr, CString};

use devmm::dlpack::{DlpackExport, DlpackFlavor, DlpackRequest};
use devmm::ArrayInterfaceKind;
use pyo3::exceptions::{PyAttributeError, PyBufferError, PyTypeError};
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict, PyTuple};

use crate::error::{to_py_err, IntoPyResult};
use crate::stream::{resolve_stream, StreamArg};

/// What a `Py_buffer` owns while a consumer holds it: an export (so a
/// `free()` waits for the consumer) and the arrays the view points into.
struct HostView {
    _export: DlpackExport,
    shape: Vec<ffi::Py_ssize_t>,
    strides: Vec<ffi::Py_ssize_t>,
    format: CString,
}

fn buffer_error(err: devmm::Error) -> PyErr {
    PyBufferError::new_err(err.to_string())
}

/// Fills `view` for `tensor`'s memory on behalf of `owner`.
///
/// # Safety
///
/// `view` is the `Py_buffer` Python passed to `bf_getbuffer`.
pub(crate) unsafe fn get_buffer(
    owner: &Bound<'_, PyAny>,
    tensor: &devmm::Tensor,
    view: *mut ffi::Py_buffer,
    flags: c_int,
) -> PyResult<()> {
    if view.is_null() {
        return Err(PyBufferError::new_err("a NULL Py_buffer was passed"));
    }
    // SAFETY: `view` is the caller's valid Py_buffer. The protocol wants
    // `obj` NULL on every failure; it is set last, once the view is whole.
    unsafe { (*view).obj = std::ptr::null_mut() };
    let ai = tensor
        .array_interface(ArrayInterfaceKind::Host)
        .map_err(buffer_error)?;
    if flags & ffi::PyBUF_WRITABLE == ffi::PyBUF_WRITABLE && ai.data.1 {
        return Err(PyBufferError::new_err(
            "the tensor is read-only; ask for a read-only buffer (bytes(), memoryview().tobytes())",
        ));
    }
    let want_strides = flags & ffi::PyBUF_STRIDES == ffi::PyBUF_STRIDES;
    if !want_strides && ai.strides.is_some() {
        return Err(PyBufferError::new_err(format!(
            "the tensor is not C-contiguous (strides {:?}); the consumer must accept strides",
            tensor.strides()
        )));
    }
    let export = tensor
        .to_dlpack(&DlpackRequest::new().max_version(1, 1))
        .map_err(buffer_error)?;
    let itemsize = tensor.dtype().itemsize();
    let to_ssize = |v: usize| {
        ffi::Py_ssize_t::try_from(v)
            .map_err(|_| PyBufferError::new_err("extent overflows Py_ssize_t"))
    };
    let bytes = |elements: usize| {
        elements
            .checked_mul(itemsize)
            .ok_or_else(|| PyBufferError::new_err("extent in bytes overflows usize"))
            .and_then(to_ssize)
    };
    let shape = tensor
        .shape()
        .iter()
        .map(|&d| to_ssize(d))
        .collect::<PyResult<Vec<_>>>()?;
    let strides = tensor
        .strides()
        .iter()
        .map(|&s| bytes(s))
        .collect::<PyResult<Vec<_>>>()?;
    let format =
        CString::new(ai.buffer_format()).map_err(|e| PyBufferError::new_err(e.to_string()))?;
    let len = bytes(tensor.numel())?;
    let mut held = Box::new(HostView {
        _export: export,
        shape,
        strides,
        format,
    });
    // An empty view still needs a non-NULL address.
    static EMPTY: u8 = 0;
    let buf = if ai.data.0 == 0 {
        std::ptr::addr_of!(EMPTY).cast_mut().cast::<c_void>()
    } else {
        ai.data.0 as *mut c_void
    };
    // SAFETY: `view` is the caller's valid Py_buffer; the pointers stored
    // point into `held`, which lives until `release_buffer` frees it, and
    // at memory the export keeps allocated for as long.
    unsafe {
        (*view).buf = buf;
        (*view).len = len;
        (*view).readonly = c_int::from(ai.data.1);
        (*view).itemsize = to_ssize(itemsize)?;
        (*view).format = if flags & ffi::PyBUF_FORMAT == ffi::PyBUF_FORMAT {
            held.format.as_ptr().cast_mut()
        } else {
            std::ptr::null_mut()
        };
        (*view).ndim = c_int::try_from(held.shape.len())
            .map_err(|_| PyBufferError::new_err("too many dimensions"))?;
        (*view).shape = if flags & ffi::PyBUF_ND == ffi::PyBUF_ND {
            held.shape.as_mut_ptr()
        } else {
            std::ptr::null_mut()
        };
        (*view).strides = if want_strides {
            held.strides.as_mut_ptr()
        } else {
            std::ptr::null_mut()
        };
        (*view).suboffsets = std::ptr::null_mut();
        (*view).internal = Box::into_raw(held).cast();
        (*view).obj = owner.clone().into_ptr();
    }
    Ok(())
}

/// Ends a view made by [`get_buffer`].
///
/// # Safety
///
/// `view` was filled by `get_buffer` and is released once (Python's contract).
pub(crate) unsafe fn release_buffer(view: *mut ffi::Py_buffer) {
    // SAFETY: `internal` is the box `get_buffer` leaked, taken back once.
    unsafe {
        let internal = (*view).internal.cast::<HostView>();
        if !internal.is_null() {
            (*view).internal = std::ptr::null_mut();
            drop(Box::from_raw(internal));
        }
    }
}

/// The dictionary of `__array_interface__` or `__cuda_array_interface__`;
/// an `AttributeError` (so `hasattr` is false) where the interface cannot
/// describe the memory.
pub(crate) fn array_interface<'py>(
    py: Python<'py>,
    tensor: &devmm::Tensor,
    kind: ArrayInterfaceKind,
) -> PyResult<Bound<'py, PyDict>> {
    let ai = tensor
        .array_interface(kind)
        .map_err(|e| PyAttributeError::new_err(e.to_string()))?;
    let dict = PyDict::new(py);
    dict.set_item(intern!(py, "shape"), PyTuple::new(py, &ai.shape)?)?;
    dict.set_item(intern!(py, "typestr"), &ai.typestr)?;
    dict.set_item(intern!(py, "data"), ai.data)?;
    match &ai.strides {
        Some(strides) => dict.set_item(intern!(py, "strides"), PyTuple::new(py, strides)?)?,
        None => dict.set_item(intern!(py, "strides"), py.None())?,
    }
    dict.set_item(intern!(py, "version"), ai.version)?;
    if kind == ArrayInterfaceKind::Cuda {
        dict.set_item(intern!(py, "stream"), ai.stream)?;
        dict.set_item(intern!(py, "mask"), py.None())?;
    }
    Ok(dict)
}

/// Imports any DLPack producer (an object with `__dlpack__`, or a capsule).
pub(crate) fn import(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    stream: Option<StreamArg>,
) -> PyResult<devmm::Tensor> {
    let (capsule, stream) =
        if let Ok(capsule) = obj.cast::<PyCapsule>() {
            if stream.is_some() {
                return Err(pyo3::exceptions::PyValueError::new_err(
                "a capsule was exported already, so there is no stream to hand off on; pass the \
                 producer itself with stream=, or the capsule without it",
            ));
            }
            (capsule.clone(), None)
        } else {
            let (ty, id): (i32, i32) =
                obj.call_method0(intern!(py, "__dlpack_device__"))
                    .map_err(|_| {
                        PyTypeError::new_err(format!(
                    "{} is not a DLPack producer (no __dlpack_device__); pass an object with \
                     __dlpack__ and __dlpack_device__, or a DLPack capsule",
                    obj.get_type().name().map(|n| n.to_string()).unwrap_or_default()
                ))
                    })?
                    .extract()?;
            let device = devmm::Device::from_dlpack(ty, id).py()?;
            let ours = resolve_stream(stream, device)?;
            let value = devmm::dlpack::consumer_stream_value(&ours);
            let kwargs = PyDict::new(py);
            kwargs.set_item(intern!(py, "stream"), value)?;
            kwargs.set_item(intern!(py, "max_version"), (1, 1))?;
            let made = match obj.call_method(intern!(py, "__dlpack__"), (), Some(&kwargs)) {
                Ok(made) => made,
                // A producer older than DLPack 1.0 takes no max_version.
                Err(err) if err.is_instance_of::<PyTypeError>(py) => {
                    kwargs.del_item(intern!(py, "max_version"))?;
                    obj.call_method(intern!(py, "__dlpack__"), (), Some(&kwargs))?
                }
                Err(err) => return Err(err),
            };
            let capsule = made.cast_into::<PyCapsule>().map_err(|_| {
                PyTypeError::new_err("__dlpack__ returned something other than a capsule")
            })?;
            (capsule, Some(ours))
        };
    take_capsule(&capsule, stream.as_ref())
}

/// Takes ownership of an unconsumed capsule: renames it `used_...` so its
/// destructor leaves the managed tensor to us, then imports it.
fn take_capsule(
    capsule: &Bound<'_, PyCapsule>,
    stream: Option<&devmm::Stream>,
) -> PyResult<devmm::Tensor> {
    let flavor = [DlpackFlavor::Versioned, DlpackFlavor::Legacy]
        .into_iter()
        .find(|f| {
            // SAFETY: a live capsule; IsValid sets no exception.
            unsafe { ffi::PyCapsule_IsValid(capsule.as_ptr(), f.capsule_name().as_ptr()) == 1 }
        })
        .ok_or_else(|| {
            PyBufferError::new_err(
                "the capsule is not an unconsumed DLPack capsule (named dltensor or \
                 dltensor_versioned); a capsule can be imported once",
            )
        })?;
    let name: &CStr = flavor.capsule_name();
    // SAFETY: the name was just checked, so GetPointer cannot fail.
    let raw = unsafe { ffi::PyCapsule_GetPointer(capsule.as_ptr(), name.as_ptr()) };
    // SAFETY: a live capsule; the new name is a static C string.
    if unsafe { ffi::PyCapsule_SetName(capsule.as_ptr(), flavor.used_capsule_name().as_ptr()) } != 0
    {
        return Err(PyErr::fetch(capsule.py()));
    }
    // SAFETY: the capsule was unconsumed and is now marked used, so the
    // managed tensor is ours alone; the core deletes it exactly once.
    let imported = unsafe {
        match stream {
            Some(stream) => devmm::Tensor::from_dlpack_on(raw, flavor, stream),
            None => devmm::Tensor::from_dlpack(raw, flavor),
        }
    };
    imported.map_err(to_py_err)
}
