//! rmm's module-level copies between host buffers and raw device
//! addresses (`copy_host_to_ptr`, `copy_ptr_to_host`,
//! `copy_device_to_ptr`), and the foreign-memory figures. The
//! default-stream rule lives in the core (`devmm::copy_host_to_ptr`).

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::count::{CopyCount, Count, DDst, DSrc, Db};
use crate::error::IntoPyResult;
use crate::stream::{maybe_detached, resolve_stream, StreamArg};

/// The stream a raw copy runs on: the one given, or the default device's
/// default stream.
fn raw_stream(stream: Option<StreamArg>) -> PyResult<devmm::Stream> {
    match stream {
        Some(StreamArg::Stream(stream)) => Ok(stream),
        other => resolve_stream(other, devmm::default_device().py()?),
    }
}

/// Copies the bytes of `hb` (any bytes-like object) to device address
/// `db`, on `stream` (the default device's default stream when `None`). On
/// a default stream the copy is done when this returns; on another it is
/// asynchronous and `hb` must stay alive and unchanged until the stream is
/// synchronized. Like ctypes, it trusts the address it is given.
///
/// `db` is an int address; `stream` a `Stream`, a sentinel or `None`. An
/// `hb` that is not contiguous is a `ValueError`.
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm
/// >>> buf = devmm.DeviceBuffer(4)
/// >>> devmm.copy_host_to_ptr(b"abcd", buf.ptr)
/// >>> bytes(buf.copy_to_host())
/// b'abcd'
///
/// ```
#[pyfunction]
#[pyo3(signature = (hb, db, stream = None))]
pub(crate) fn copy_host_to_ptr(
    py: Python<'_>,
    hb: &Bound<'_, PyAny>,
    db: Count<Db>,
    stream: Option<StreamArg>,
) -> PyResult<()> {
    let (db, stream) = (db.get(), raw_stream(stream)?);
    let src = PyBuffer::<u8>::get(hb)?;
    if !src.is_c_contiguous() {
        return Err(PyValueError::new_err("hb must be a contiguous buffer"));
    }
    let (ptr, len) = (src.buf_ptr() as usize, src.len_bytes());
    maybe_detached(py, stream.device(), || {
        // SAFETY: `src` holds `len` contiguous bytes at `ptr` for the call.
        let bytes = unsafe { std::slice::from_raw_parts(ptr as *const u8, len) };
        // SAFETY: the caller vouches for `db`, as rmm's callers do.
        unsafe { devmm::copy_host_to_ptr(bytes, devmm::DevicePtr::from_addr(db), &stream) }
    })
    .py()
}

/// Copies `len(hb)` bytes from device address `db` into `hb` (a writable
/// bytes-like object), on `stream` (see `copy_host_to_ptr`).
///
/// A read-only or non-contiguous `hb` is a `ValueError`.
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm
/// >>> buf = devmm.DeviceBuffer.to_device(b"abcd")
/// >>> out = bytearray(4)
/// >>> devmm.copy_ptr_to_host(buf.ptr, out)
/// >>> out
/// bytearray(b'abcd')
///
/// ```
#[pyfunction]
#[pyo3(signature = (db, hb, stream = None))]
pub(crate) fn copy_ptr_to_host(
    py: Python<'_>,
    db: Count<Db>,
    hb: &Bound<'_, PyAny>,
    stream: Option<StreamArg>,
) -> PyResult<()> {
    let (db, stream) = (db.get(), raw_stream(stream)?);
    let dst = PyBuffer::<u8>::get(hb)?;
    if dst.readonly() || !dst.is_c_contiguous() {
        return Err(PyValueError::new_err(
            "hb must be a writable, contiguous buffer",
        ));
    }
    let (ptr, len) = (dst.buf_ptr() as usize, dst.len_bytes());
    maybe_detached(py, stream.device(), || {
        // SAFETY: `dst` holds `len` writable contiguous bytes at `ptr`.
        let bytes = unsafe { std::slice::from_raw_parts_mut(ptr as *mut u8, len) };
        // SAFETY: the caller vouches for `db`.
        unsafe { devmm::copy_ptr_to_host(devmm::DevicePtr::from_addr(db), bytes, &stream) }
    })
    .py()
}

/// Copies `count` bytes from device address `d_src` to `d_dst`, on
/// `stream` (see `copy_host_to_ptr`).
///
/// `d_src`, `d_dst` and `count` are ints.
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm
/// >>> src, dst = devmm.DeviceBuffer.to_device(b"abcd"), devmm.DeviceBuffer(4)
/// >>> devmm.copy_device_to_ptr(src.ptr, dst.ptr, 4)
/// >>> bytes(dst.copy_to_host())
/// b'abcd'
///
/// ```
#[pyfunction]
#[pyo3(signature = (d_src, d_dst, count, stream = None))]
pub(crate) fn copy_device_to_ptr(
    py: Python<'_>,
    d_src: Count<DSrc>,
    d_dst: Count<DDst>,
    count: Count<CopyCount>,
    stream: Option<StreamArg>,
) -> PyResult<()> {
    let (d_src, d_dst, count) = (d_src.get(), d_dst.get(), count.get());
    let stream = raw_stream(stream)?;
    maybe_detached(py, stream.device(), || {
        // SAFETY: the caller vouches for both ranges.
        unsafe {
            devmm::copy_device_to_ptr(
                devmm::DevicePtr::from_addr(d_src),
                devmm::DevicePtr::from_addr(d_dst),
                count,
                &stream,
            )
        }
    })
    .py()
}

/// What devmm holds of memory it did not allocate (DLPack imports):
/// `live_count`, `live_bytes`, `total_count`, `total_bytes`.
///
/// Python type: `dict[str, int]`
///
/// Examples
/// --------
///
/// ```python
/// >>> import numpy as np
/// >>> import devmm
/// >>> before = devmm.foreign_memory()
/// >>> imported = devmm.from_dlpack(np.zeros(4, dtype=np.uint8))
/// >>> after = devmm.foreign_memory()
/// >>> after["live_count"] - before["live_count"], after["live_bytes"] - before["live_bytes"]
/// (1, 4)
///
/// ```
#[pyfunction]
pub(crate) fn foreign_memory(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let stats = devmm::foreign_memory();
    let dict = PyDict::new(py);
    dict.set_item("live_count", stats.live_count)?;
    dict.set_item("live_bytes", stats.live_bytes)?;
    dict.set_item("total_count", stats.total_count)?;
    dict.set_item("total_bytes", stats.total_bytes)?;
    Ok(dict)
}
