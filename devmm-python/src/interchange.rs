//! Interchange beyond `__dlpack__`: DLPack import (`from_dlpack`), the
//! buffer protocol over host memory, and the two array-interface
//! dictionaries. The rules (what each interface may describe, type
//! strings, import ownership) live in the core; this module converts.

use std::ffi::{c_int, c_void, CStr};

use devmm::dlpack::ffi::{DLPACK_MAJOR_VERSION as MAJOR, DLPACK_MINOR_VERSION as MINOR};
use devmm::dlpack::DlpackFlavor;
use devmm::interop::BufferView;
use devmm::ArrayInterfaceKind;
use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyCapsule, PyDict, PyString, PyTuple, PyType};

use crate::error::{protocol_error, to_py_err, IntoPyResult, Protocol};
use crate::expected::type_name;
use crate::stream::{resolve_stream, StreamArg};

/// A buffer view's failure, as the buffer protocol reports it.
fn buffer_error(err: devmm::Error) -> PyErr {
    protocol_error(Protocol::Buffer, err)
}

/// Fills `view` for `tensor`'s memory on behalf of `owner`, from the
/// core's [`BufferView`], which the view keeps until it is released.
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
    let asks = |flag: c_int| flags & flag == flag;
    // The view waits for queued work on pinned or managed memory; waited
    // for here first, without the GIL, it finds none.
    crate::stream::maybe_detached(owner.py(), tensor.device(), || tensor.wait_for_host())
        .map_err(buffer_error)?;
    let mut held = Box::new(
        BufferView::new(tensor, asks(ffi::PyBUF_WRITABLE), asks(ffi::PyBUF_STRIDES))
            .map_err(buffer_error)?,
    );
    let ndim = c_int::try_from(held.shape.len())
        .map_err(|_| PyBufferError::new_err("too many dimensions"))?;
    // SAFETY: `view` is the caller's valid Py_buffer; the pointers stored
    // point into `held`, which lives until `release_buffer` frees it, and
    // at memory its export keeps allocated for as long.
    unsafe {
        (*view).buf = held.buf;
        (*view).len = held.len;
        (*view).readonly = c_int::from(held.readonly);
        (*view).itemsize = held.itemsize;
        (*view).format = match asks(ffi::PyBUF_FORMAT) {
            true => held.format.as_ptr().cast_mut(),
            false => std::ptr::null_mut(),
        };
        (*view).ndim = ndim;
        (*view).shape = match asks(ffi::PyBUF_ND) {
            true => held.shape.as_mut_ptr(),
            false => std::ptr::null_mut(),
        };
        (*view).strides = match asks(ffi::PyBUF_STRIDES) {
            true => held.strides.as_mut_ptr(),
            false => std::ptr::null_mut(),
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
        let internal = (*view).internal.cast::<BufferView>();
        if !internal.is_null() {
            (*view).internal = std::ptr::null_mut();
            drop(Box::from_raw(internal));
        }
    }
}

/// The dictionary of `__array_interface__` or `__cuda_array_interface__`;
/// an `AttributeError` (so `hasattr` is false) where the interface cannot
/// describe the memory. Freed memory is a `BufferError` instead, as the
/// buffer protocol and `__dlpack__` refuse it: NumPy reads an
/// `AttributeError` as "no interface" and would wrap the tensor in a 0-d
/// object array rather than fail.
pub(crate) fn array_interface<'py>(
    py: Python<'py>,
    tensor: &devmm::Tensor,
    kind: ArrayInterfaceKind,
) -> PyResult<Bound<'py, PyDict>> {
    // Without the GIL: for pinned or managed memory it waits for queued work.
    let ai = crate::stream::maybe_detached(py, tensor.device(), || tensor.array_interface(kind))
        .map_err(|e| protocol_error(Protocol::ArrayInterface, e))?;
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
    if let Ok(capsule) = obj.cast::<PyCapsule>() {
        if stream.is_some() {
            return Err(PyValueError::new_err(
                "a capsule was exported already, so there is no stream to hand off on; pass the \
                 producer itself with stream=, or the capsule without it",
            ));
        }
        return take_capsule(capsule, None, None);
    }
    // Some only for a NumPy array (of a subclass too).
    let ndarray = ndarray_type(py).filter(|ndarray| is_array(obj, ndarray));
    let device = if ndarray.is_some_and(|ndarray| obj.get_type().is(ndarray)) {
        // NumPy's own ndarray (not a subclass, which may override the
        // method) always answers (kDLCPU, 0): the call is skipped, as
        // NumPy's `from_dlpack` skips it by naming the CPU.
        devmm::Device::CPU
    } else {
        let (ty, id): (i32, i32) = call_method(obj, intern!(py, "__dlpack_device__"), &[], None)
            .map_err(|_| {
                PyTypeError::new_err(format!(
                    "{} is not a DLPack producer (no __dlpack_device__); pass an object with \
                     __dlpack__ and __dlpack_device__, or a DLPack capsule",
                    type_name(obj)
                ))
            })?
            .extract()?;
        devmm::Device::from_dlpack(ty, id).py()?
    };
    let ours = resolve_stream(stream, device)?;
    let value = devmm::dlpack::consumer_stream_value(&ours).into_pyobject(py)?;
    let dlpack = intern!(py, "__dlpack__");
    let (names, max_version) = keywords(py)?;
    let made = match call_method(obj, dlpack, &[&value, max_version], Some(names)) {
        Ok(made) => made,
        // A producer older than DLPack 1.0 takes no max_version.
        Err(err) if err.is_instance_of::<PyTypeError>(py) => {
            let names = PyTuple::new(py, [intern!(py, "stream")])?;
            call_method(obj, dlpack, &[&value], Some(&names))?
        }
        Err(err) => return Err(err),
    };
    let capsule = made
        .cast_into::<PyCapsule>()
        .map_err(|_| PyTypeError::new_err("__dlpack__ returned something other than a capsule"))?;
    // The base's capsule is held until the import is done with its struct.
    let viewed = ndarray.and_then(|ndarray| viewed_export(obj, ndarray));
    let origin = viewed.as_ref().map(|(_, raw, flavor)| (*raw, *flavor));
    take_capsule(&capsule, Some(&ours), origin)
}

/// NumPy's `ndarray` type, once NumPy is imported (no array exists
/// before): looked up in `sys.modules` until then, and kept after, so an
/// import of any other producer asks NumPy nothing.
fn ndarray_type(py: Python<'_>) -> Option<&Bound<'_, PyType>> {
    static NDARRAY: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    NDARRAY
        .get_or_try_init(py, || {
            // SAFETY: an interned str; the result is a new reference, or
            // NULL (not imported, or no module dict late in finalisation,
            // with an exception set), which `from_owned_ptr_or_opt` takes.
            let numpy = unsafe {
                Bound::from_owned_ptr_or_opt(py, PyImport_GetModule(intern!(py, "numpy").as_ptr()))
            };
            let Some(numpy) = numpy else {
                // Clears the error NULL may have set: "not yet" is no error.
                drop(PyErr::take(py));
                return Err(());
            };
            // Any failure (a module still importing) is asked again next time.
            let ndarray = numpy.getattr(intern!(py, "ndarray")).map_err(drop)?;
            Ok(ndarray.cast_into::<PyType>().map_err(drop)?.unbind())
        })
        .ok()
        .map(|ndarray| ndarray.bind(py))
}

/// The names of `__dlpack__`'s keywords (`stream`, `max_version`) and the
/// `max_version` devmm asks for, the newest DLPack the core reads: made
/// once, since every import passes them. The names are interned, so a
/// producer's argument parser finds them by identity, not by comparing
/// strings.
fn keywords(py: Python<'_>) -> PyResult<(&Bound<'_, PyTuple>, &Bound<'_, PyAny>)> {
    static KEYWORDS: PyOnceLock<(Py<PyTuple>, Py<PyAny>)> = PyOnceLock::new();
    let (names, max_version) = KEYWORDS.get_or_try_init(py, || {
        let names = PyTuple::new(py, [intern!(py, "stream"), intern!(py, "max_version")])?;
        let max_version = (MAJOR, MINOR).into_pyobject(py)?.into_any();
        PyResult::Ok((names.unbind(), max_version.unbind()))
    })?;
    Ok((names.bind(py), max_version.bind(py)))
}

// In the limited API since 3.7, but left out of pyo3's abi3 bindings.
extern "C" {
    fn PyImport_GetModule(name: *mut ffi::PyObject) -> *mut ffi::PyObject;
}

// `PyObject_VectorcallMethod` is in the stable ABI from Python 3.12, so
// PyO3 declares it only for abi3-py312 builds. The package supports 3.11
// (abi3-py311), whose interpreter exports the same function with the same
// signature (public API since 3.9), so it is declared here.
extern "C" {
    fn PyObject_VectorcallMethod(
        name: *mut ffi::PyObject,
        args: *const *mut ffi::PyObject,
        nargsf: usize,
        kwnames: *mut ffi::PyObject,
    ) -> *mut ffi::PyObject;
}

/// `obj.name(**dict(zip(names, values)))` through CPython's vectorcall:
/// unlike `call_method` with a dict, it makes no bound method and no
/// keyword dict for the callee to unpack again, about a thousand
/// instructions of each DLPack import.
fn call_method<'py>(
    obj: &Bound<'py, PyAny>,
    name: &Bound<'py, PyString>,
    values: &[&Bound<'py, PyAny>],
    names: Option<&Bound<'py, PyTuple>>,
) -> PyResult<Bound<'py, PyAny>> {
    const MOST: usize = 2;
    assert!(
        values.len() <= MOST && values.len() == names.map_or(0, |n| n.len()),
        "one name per keyword value, at most {MOST}"
    );
    let mut args = [obj.as_ptr(); 1 + MOST];
    for (slot, value) in args[1..].iter_mut().zip(values) {
        *slot = value.as_ptr();
    }
    let kwnames = names.map_or(std::ptr::null_mut(), |n| n.as_ptr());
    // SAFETY: `args` holds `obj` then one live value per name in
    // `kwnames` (asserted above), all borrowed for the call; `nargsf` is
    // 1, the positional `obj`, without PY_VECTORCALL_ARGUMENTS_OFFSET, so
    // the callee may not write to `args`. A null result has set an
    // exception, which `from_owned_ptr_or_err` takes.
    unsafe {
        let made = PyObject_VectorcallMethod(name.as_ptr(), args.as_ptr(), 1, kwnames);
        Bound::from_owned_ptr_or_err(obj.py(), made)
    }
}

/// Whether `obj` is an array of `ndarray`'s type or a subclass. Unlike
/// `isinstance`, it asks no `__class__` of an object of another type, and
/// unlike `issubclass` no metaclass (about a hundred instructions fewer
/// per import of a NumPy array, measured).
fn is_array(obj: &Bound<'_, PyAny>, ndarray: &Bound<'_, PyType>) -> bool {
    // SAFETY: two live objects; PyType_IsSubtype reads the type's MRO,
    // runs no Python and sets no exception.
    unsafe { ffi::PyType_IsSubtype(ffi::Py_TYPE(obj.as_ptr()), ndarray.as_type_ptr()) != 0 }
}

/// The managed struct NumPy keeps in the `base` of an array it imported
/// with `np.from_dlpack`, which the core recognises when it is a devmm
/// export: devmm then imports that export's buffer instead of NumPy's
/// export of the array, so a chain of `np.from_dlpack(devmm.from_dlpack(x))`
/// never nests (its release recursed through NumPy's deleters, one native
/// frame per link, until the stack overflowed). A view of such an array
/// (a slice, `.view(Sub)`, a reshape) has that array as its `base`, so
/// the walk goes down arrays to the capsule. `None` for any other array.
/// Only NumPy arrays are asked (`ndarray`, NumPy's type): no other
/// producer keeps NumPy's capsule, and a producer without a `base` would
/// cost a Python exception per import. The capsule comes with the struct:
/// the caller holds it while the core reads the struct, since a subclass's
/// `base` may be any object, a temporary one included.
fn viewed_export<'py>(
    obj: &Bound<'py, PyAny>,
    ndarray: &Bound<'py, PyType>,
) -> Option<(Bound<'py, PyCapsule>, *mut c_void, DlpackFlavor)> {
    // NumPy collapses views onto the array that owns the capsule, so one
    // step is the most its own arrays take; a subclass's `base` may loop.
    const MOST_STEPS: usize = 8;
    let name = intern!(obj.py(), "base");
    let mut base = obj.getattr(name).ok()?;
    for _ in 0..MOST_STEPS {
        if !is_array(&base, ndarray) {
            break;
        }
        base = base.getattr(name).ok()?;
    }
    let capsule = base.cast_into::<PyCapsule>().ok()?;
    let (raw, flavor) = [
        (c"numpy_dltensor_versioned", DlpackFlavor::Versioned),
        (c"numpy_dltensor", DlpackFlavor::Legacy),
    ]
    .into_iter()
    .find_map(|(name, flavor)| {
        // SAFETY: a live capsule; IsValid sets no exception, and with the
        // name checked GetPointer cannot fail.
        unsafe {
            (ffi::PyCapsule_IsValid(capsule.as_ptr(), name.as_ptr()) == 1).then(|| {
                (
                    ffi::PyCapsule_GetPointer(capsule.as_ptr(), name.as_ptr()),
                    flavor,
                )
            })
        }
    })?;
    Some((capsule, raw, flavor))
}

/// Takes ownership of an unconsumed capsule: renames it `used_...` so its
/// destructor leaves the managed tensor to us, then imports it.
fn take_capsule(
    capsule: &Bound<'_, PyCapsule>,
    stream: Option<&devmm::Stream>,
    viewed: Option<(*mut c_void, DlpackFlavor)>,
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
    // managed tensor is ours alone; the core deletes it exactly once. The
    // viewed struct lives in a capsule the caller holds.
    let imported = unsafe {
        match (viewed, stream) {
            (Some((origin, origin_flavor)), stream) => {
                devmm::Tensor::from_dlpack_viewing(raw, flavor, stream, origin, origin_flavor)
            }
            (None, Some(stream)) => devmm::Tensor::from_dlpack_on(raw, flavor, stream),
            (None, None) => devmm::Tensor::from_dlpack(raw, flavor),
        }
    };
    imported.map_err(to_py_err)
}
