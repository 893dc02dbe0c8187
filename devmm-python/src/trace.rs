//! `TraceAdaptor` for Python: every allocate, allocate failure and free
//! written to a file as it happens.

use std::sync::{Arc, OnceLock};

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;

use crate::adaptors::{adapt, upstream_of};
use crate::error::IntoPyResult;
use crate::resource::{built, shipped_new, PyMemoryResource};

type Upstream = Arc<dyn devmm::MemoryResource>;

/// Writes every allocate, allocate failure and free to the file at `path`
/// as it happens: `format="csv"` is rmm's `logging_resource_adaptor` CSV
/// (`Thread,Time,Action,Pointer,Size,Stream`), `format="jsonl"` one JSON
/// object a line with the device and, when `call_sites` > 0, the call site
/// (that many native frames deep; the Python stack for calls from Python).
/// An unknown format is a `ValueError`, a file that cannot be created an `OSError`.
///
/// `TraceAdaptor(upstream, path, format="csv", call_sites=0)`: `path` is a
/// string or path-like.
///
/// Examples
/// --------
///
/// ```python
/// >>> import os, tempfile
/// >>> import devmm
/// >>> from devmm.mrs.cpu import MallocMemoryResource
/// >>> path = os.path.join(tempfile.mkdtemp(), "trace.csv")
/// >>> traced = devmm.TraceAdaptor(MallocMemoryResource(), path)
/// >>> devmm.DeviceBuffer(32, mr=traced).free()
/// >>> traced.flush()
/// >>> print(open(path).read())
/// Thread,Time,Action,Pointer,Size,Stream
/// ...,allocate,0x...,32,0
/// ...,free,0x...,32,0
/// <BLANKLINE>
/// >>> devmm.TraceAdaptor(MallocMemoryResource(), path, format="xml")
/// Traceback (most recent call last):
///     ...
/// ValueError: unknown trace format "xml": use "csv" (rmm's) or "jsonl"
///
/// ```
#[pyclass(extends = PyMemoryResource, subclass, name = "TraceAdaptor", module = "devmm")]
#[derive(Default)]
pub(crate) struct PyTraceAdaptor {
    /// The adaptor and its file's path.
    trace: OnceLock<(Arc<devmm::TraceAdaptor<Upstream>>, String)>,
}

impl PyTraceAdaptor {
    fn trace(&self) -> PyResult<(&devmm::TraceAdaptor<Upstream>, &str)> {
        built(&self.trace).map(|(trace, path)| (&**trace, path.as_str()))
    }
}

shipped_new!(PyTraceAdaptor);

#[pymethods]
impl PyTraceAdaptor {
    #[pyo3(signature = (upstream, path, format = "csv", call_sites = 0))]
    fn __init__(
        slf: &Bound<'_, Self>,
        upstream: &Bound<'_, PyMemoryResource>,
        path: String,
        format: &str,
        call_sites: usize,
    ) -> PyResult<()> {
        let format: devmm::trace::TraceFormat = format.parse().py()?;
        let (trace, base) = adapt(upstream, |mr| {
            Ok(devmm::TraceAdaptor::to_file(mr, path.as_ref(), format)
                .py()?
                .with_call_sites(call_sites))
        })?;
        PyMemoryResource::install(slf.as_super(), base)?;
        let _ = slf.borrow().trace.set((trace, path));
        Ok(())
    }

    /// The wrapped resource.
    #[getter]
    fn upstream(&self, py: Python<'_>) -> PyResult<Py<PyMemoryResource>> {
        upstream_of(py, self.trace()?.0)
    }

    /// The trace file.
    #[getter]
    fn path(&self) -> PyResult<String> {
        Ok(self.trace()?.1.to_owned())
    }

    /// Flushes the file (`OSError` when writing failed).
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import os, tempfile
    /// >>> import devmm
    /// >>> from devmm.mrs.cpu import MallocMemoryResource
    /// >>> path = os.path.join(tempfile.mkdtemp(), "trace.jsonl")
    /// >>> traced = devmm.TraceAdaptor(MallocMemoryResource(), path, format="jsonl")
    /// >>> buf = devmm.DeviceBuffer(8, mr=traced)
    /// >>> traced.flush()
    /// >>> len(open(path).readlines())
    /// 1
    ///
    /// ```
    fn flush(&self) -> PyResult<()> {
        let (trace, path) = self.trace()?;
        trace
            .flush()
            .map_err(|e| PyOSError::new_err(format!("cannot write the trace {path}: {e}")))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let (trace, path) = self.trace()?;
        let upstream = upstream_of(py, trace)?;
        Ok(format!(
            "TraceAdaptor({}, path={path:?})",
            upstream.bind(py).repr()?
        ))
    }
}
