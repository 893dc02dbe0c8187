//! `devmm.statistics`' native part: the profiler's records, whose
//! arithmetic and report live in the core (`devmm::statistics`), and the
//! conversions of the counters and records to and from the module's
//! Python dataclasses.

use std::sync::Arc;

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::error::IntoPyResult;
use crate::expected::expected;
use crate::pool_statistics::pool_statistics_object;
use crate::resource::{resource_of, PyMemoryResource};
use crate::value_class::ValueClass;

/// The module's dataclasses that carry the counters and the records.
static STATISTICS: ValueClass<()> = ValueClass::new("devmm.statistics", "Statistics");
static MEMORY_RECORD: ValueClass<()> = ValueClass::new("devmm.statistics", "MemoryRecord");

/// `stats` as a `devmm.statistics.Statistics`.
pub(crate) fn statistics_object<'py>(
    py: Python<'py>,
    stats: &devmm::Statistics,
) -> PyResult<Bound<'py, PyAny>> {
    let s = stats;
    let fields = (
        s.current_bytes,
        s.peak_bytes,
        s.total_bytes,
        s.allocations,
        s.deallocations,
    );
    STATISTICS.class(py)?.call1(fields)
}

/// A `devmm.statistics.Statistics` argument, read back into the core's counters.
///
/// Python type: `devmm.statistics.Statistics`
pub(crate) struct StatisticsArg(devmm::Statistics);

impl<'py> FromPyObject<'_, 'py> for StatisticsArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        let py = obj.py();
        if !STATISTICS.holds(&obj)? {
            return Err(expected("a devmm.statistics.Statistics", &obj));
        }
        let field =
            |name: &Bound<'py, PyString>| -> PyResult<usize> { obj.getattr(name)?.extract() };
        Ok(StatisticsArg(devmm::Statistics {
            current_bytes: field(intern!(py, "current_bytes"))?,
            peak_bytes: field(intern!(py, "peak_bytes"))?,
            total_bytes: field(intern!(py, "total_bytes"))?,
            allocations: field(intern!(py, "allocations"))?,
            deallocations: field(intern!(py, "deallocations"))?,
        }))
    }
}

/// Per-name memory records that `profiler` fills; thread-safe.
///
/// `ProfilerRecords()`; `records` maps each name to a
/// `devmm.statistics.MemoryRecord`.
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm
/// >>> from devmm.statistics import ProfilerRecords, profiler
/// >>> records = ProfilerRecords()
/// >>> with profiler(records=records, name="load"):
/// ...     devmm.DeviceBuffer(256).free()
/// >>> records.records
/// {'load': MemoryRecord(num_calls=1, memory_total=256, memory_peak=256)}
///
/// ```
#[pyclass(frozen, name = "ProfilerRecords", module = "devmm.statistics")]
pub(crate) struct PyProfilerRecords {
    inner: Arc<devmm::statistics::ProfilerRecords>,
}

#[pymethods]
impl PyProfilerRecords {
    /// No records yet.
    #[new]
    fn py_new() -> Self {
        PyProfilerRecords {
            inner: Arc::new(devmm::statistics::ProfilerRecords::new()),
        }
    }

    /// Adds one run of `name` that ended with counters `data`.
    ///
    /// `data` is a `devmm.statistics.Statistics` (its `total_bytes` and
    /// `peak_bytes` are recorded).
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> from devmm.statistics import ProfilerRecords, Statistics
    /// >>> records = ProfilerRecords()
    /// >>> records.add("load", Statistics(current_bytes=0, peak_bytes=256, total_bytes=512,
    /// ...                                allocations=2, deallocations=2))
    /// >>> records.records["load"]
    /// MemoryRecord(num_calls=1, memory_total=512, memory_peak=256)
    ///
    /// ```
    fn add(&self, name: &str, data: StatisticsArg) {
        self.inner.add(name, &data.0);
    }

    /// The records, by name, as `devmm.statistics.MemoryRecord`s.
    ///
    /// Python type: `dict[str, devmm.statistics.MemoryRecord]`
    #[getter]
    fn records<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let records = PyDict::new(py);
        for (name, r) in self.inner.records() {
            let fields = (r.num_calls, r.memory_total, r.memory_peak);
            records.set_item(name, MEMORY_RECORD.class(py)?.call1(fields)?)?;
        }
        Ok(records)
    }

    /// Records the figures of the pool below `mr` (the first resource of its
    /// chain with a pool of its own), as the driver tells them now, under
    /// that resource as resource chains name it; returns whether there was
    /// one. `profiler` does this at the end of each run.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> from devmm.statistics import ProfilerRecords
    /// >>> from devmm.mrs.cpu import MallocMemoryResource
    /// >>> records = ProfilerRecords()
    /// >>> records.add_pool(MallocMemoryResource())  # malloc has no pool
    /// False
    /// >>> records.pools
    /// {}
    /// >>> from devmm.mrs.cuda import CudaAsyncMemoryResource
    /// >>> records.add_pool(CudaAsyncMemoryResource("cuda:0"))  # doctest: +SKIP
    /// True
    /// >>> print(records.report())  # doctest: +SKIP
    ///
    /// ```
    fn add_pool(&self, py: Python<'_>, mr: &Bound<'_, PyMemoryResource>) -> PyResult<bool> {
        let mr = resource_of(mr)?;
        crate::gil::detach(py, || self.inner.add_pool(&*mr)).py()
    }

    /// The figures of each pool below a profiled resource at the end of
    /// its last run, by the pool's resource as devmm's resource chains name it.
    ///
    /// Python type: `dict[str, devmm.statistics.PoolStatistics]`
    #[getter]
    fn pools<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let pools = PyDict::new(py);
        for (name, figures) in self.inner.pools() {
            pools.set_item(name, pool_statistics_object(py, &figures)?)?;
        }
        Ok(pools)
    }

    /// The records as a table, largest first by `ordered_by`
    /// (`"num_calls"`, `"memory_peak"` or `"memory_total"`; else `ValueError`),
    /// then the pools' figures and fragmentation (reserved minus used), if
    /// a profiled resource had a pool.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> from devmm.statistics import ProfilerRecords, Statistics
    /// >>> records = ProfilerRecords()
    /// >>> records.add("load", Statistics(0, 256, 512, 2, 2))
    /// >>> print(records.report("num_calls"))
    /// Memory Profiling
    /// ================
    /// <BLANKLINE>
    /// Name      ncalls      peak bytes     total bytes
    /// load           1             256             512
    /// <BLANKLINE>
    /// >>> records.report("size")
    /// Traceback (most recent call last):
    ///     ...
    /// ValueError: unknown report order "size": expected num_calls, memory_peak or memory_total
    ///
    /// ```
    #[pyo3(signature = (ordered_by = "memory_peak"))]
    fn report(&self, ordered_by: &str) -> PyResult<String> {
        Ok(self.inner.report(ordered_by.parse().py()?))
    }

    fn __repr__(&self) -> String {
        format!("ProfilerRecords({} names)", self.inner.records().len())
    }
}
