//! `TrackingAdaptor` for Python: live allocations with their call sites
//! (the Python stack for calls from Python), leak reports, PyTorch
//! snapshots.

use std::sync::{Arc, OnceLock};
use std::time::UNIX_EPOCH;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::adaptors::{adapt, upstream_of};
use crate::resource::{built, shipped_new, PyMemoryResource};
use crate::value_class::ValueClass;

type Upstream = Arc<dyn devmm::MemoryResource>;

/// Prints the leak report of every `TrackingAdaptor` still holding
/// allocations (with `DEVMM_LEAK_REPORT=1`); registered with `atexit`, so
/// it runs before the interpreter frees what the program still held.
#[pyfunction]
pub(crate) fn _print_leak_reports() {
    devmm::print_leak_reports();
}

/// `devmm.LiveAllocation`, a dataclass of `devmm._tracking`.
static LIVE_ALLOCATION: ValueClass<()> = ValueClass::new("devmm._tracking", "LiveAllocation");

/// `a` as a `devmm.LiveAllocation`.
fn live_allocation<'py>(py: Python<'py>, a: devmm::LiveAllocation) -> PyResult<Bound<'py, PyAny>> {
    let time = a
        .time
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let frames = a
        .site
        .frames()
        .into_iter()
        .map(|f| (f.file, f.line, f.function));
    let fields = (
        a.ptr.addr(),
        a.nbytes,
        a.stream,
        time,
        a.thread,
        a.thread_name.as_deref(),
        PyTuple::new(py, frames)?,
    );
    LIVE_ALLOCATION.class(py)?.call1(fields)
}

/// Records every live allocation with its size, stream, time, thread and
/// call site (the Python stack for calls from Python, else a native
/// backtrace at most `depth` frames deep); `leaks()` lists them and
/// `report()` groups them by call site, most live bytes first. With
/// `DEVMM_LEAK_REPORT=1`, one still holding allocations when it is freed or
/// when the process exits prints its report to stderr.
///
/// `TrackingAdaptor(upstream, depth=32)`.
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm
/// >>> from devmm.mrs.cpu import MallocMemoryResource
/// >>> tracking = devmm.TrackingAdaptor(MallocMemoryResource())
/// >>> buf = devmm.DeviceBuffer(64, mr=tracking)
/// >>> tracking.live_bytes, len(tracking.leaks())
/// (64, 1)
/// >>> buf.free()
/// >>> tracking.live_bytes
/// 0
///
/// ```
#[pyclass(extends = PyMemoryResource, subclass, name = "TrackingAdaptor", module = "devmm")]
#[derive(Default)]
pub(crate) struct PyTrackingAdaptor {
    tracking: OnceLock<Arc<devmm::TrackingAdaptor<Upstream>>>,
}

impl PyTrackingAdaptor {
    fn tracking(&self) -> PyResult<&devmm::TrackingAdaptor<Upstream>> {
        built(&self.tracking).map(|tracking| &**tracking)
    }
}

shipped_new!(PyTrackingAdaptor);

#[pymethods]
impl PyTrackingAdaptor {
    #[pyo3(signature = (upstream, depth = devmm::DEFAULT_TRACKING_DEPTH))]
    #[pyo3(text_signature = "($self, upstream, depth=32)")]
    fn __init__(
        slf: &Bound<'_, Self>,
        upstream: &Bound<'_, PyMemoryResource>,
        depth: usize,
    ) -> PyResult<()> {
        let (tracking, base) = adapt(upstream, |mr| {
            Ok(devmm::TrackingAdaptor::with_depth(mr, depth))
        })?;
        PyMemoryResource::install(slf.as_super(), base)?;
        let _ = slf.borrow().tracking.set(tracking);
        Ok(())
    }

    /// The wrapped resource.
    #[getter]
    fn upstream(&self, py: Python<'_>) -> PyResult<Py<PyMemoryResource>> {
        upstream_of(py, self.tracking()?)
    }

    /// Bytes allocated through the adaptor and not yet freed.
    #[getter]
    fn live_bytes(&self) -> PyResult<usize> {
        Ok(self.tracking()?.live_bytes())
    }

    /// Every live allocation, oldest first.
    ///
    /// Python type: `list[devmm._tracking.LiveAllocation]`
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm
    /// >>> from devmm.mrs.cpu import MallocMemoryResource
    /// >>> tracking = devmm.TrackingAdaptor(MallocMemoryResource())
    /// >>> buf = devmm.DeviceBuffer(64, mr=tracking)
    /// >>> [(leak.nbytes, leak.ptr == buf.ptr) for leak in tracking.leaks()]
    /// [(64, True)]
    ///
    /// ```
    fn leaks<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let leaks = self.tracking()?.leaks().into_iter();
        leaks.map(|a| live_allocation(py, a)).collect()
    }

    /// The live allocations grouped by call site, most live bytes first, as text.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm
    /// >>> from devmm.mrs.cpu import MallocMemoryResource
    /// >>> tracking = devmm.TrackingAdaptor(MallocMemoryResource())
    /// >>> buf = devmm.DeviceBuffer(64, mr=tracking)
    /// >>> print(tracking.report())
    /// devmm leak report: 1 live allocation (64 bytes) on cpu:0 through TrackingAdaptor -> MallocMemoryResource(device=cpu:0, alignment=64)
    ///   64 bytes in 1 allocation at <doctest ...>:1 in <module>
    /// ...
    ///
    /// ```
    fn report(&self) -> PyResult<String> {
        Ok(self.tracking()?.report().to_string())
    }

    /// The live allocations as a PyTorch memory snapshot (the pickle
    /// `torch.cuda.memory._snapshot()` makes, read by `torch.cuda._memory_viz`).
    ///
    /// Returns `bytes`: the snapshot pickled.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import pickle
    /// >>> import devmm
    /// >>> from devmm.mrs.cpu import MallocMemoryResource
    /// >>> tracking = devmm.TrackingAdaptor(MallocMemoryResource())
    /// >>> buf = devmm.DeviceBuffer(64, mr=tracking)
    /// >>> sorted(pickle.loads(tracking.torch_snapshot()))
    /// ['allocator_settings', 'device_traces', 'segments']
    ///
    /// ```
    fn torch_snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        Ok(PyBytes::new(
            py,
            &self.tracking()?.torch_snapshot().to_pickle(),
        ))
    }
}
