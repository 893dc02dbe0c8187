//! `devmm.statistics`' native part: the profiler's records, whose
//! arithmetic and report live in the core (`devmm::statistics`), and the
//! conversions of the counters and records to and from the module's
//! Python dataclasses.

use std::collections::BTreeMap;
use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::error::expected;

/// A statistics adaptor's counters at one moment, handed to and from
/// Python as the frozen dataclass `devmm.statistics.Statistics`.
///
/// Python type: `devmm.statistics.Statistics`
pub(crate) struct StatisticsRecord(pub(crate) devmm::Statistics);

/// The class `name` of the `devmm.statistics` module (its dataclasses).
fn record_class<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import(intern!(py, "devmm.statistics"))?.getattr(name)
}

impl<'py> IntoPyObject<'py> for StatisticsRecord {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Self::Output> {
        let s = self.0;
        record_class(py, "Statistics")?.call1((
            s.current_bytes,
            s.peak_bytes,
            s.total_bytes,
            s.allocations,
            s.deallocations,
        ))
    }
}

impl<'py> FromPyObject<'_, 'py> for StatisticsRecord {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        let py = obj.py();
        if !obj.is_instance(&record_class(py, "Statistics")?)? {
            return Err(expected("a devmm.statistics.Statistics", &obj));
        }
        let field =
            |name: &Bound<'py, PyString>| -> PyResult<usize> { obj.getattr(name)?.extract() };
        Ok(StatisticsRecord(devmm::Statistics {
            current_bytes: field(intern!(py, "current_bytes"))?,
            peak_bytes: field(intern!(py, "peak_bytes"))?,
            total_bytes: field(intern!(py, "total_bytes"))?,
            allocations: field(intern!(py, "allocations"))?,
            deallocations: field(intern!(py, "deallocations"))?,
        }))
    }
}

/// What the profiler gathered for one name, handed to Python as the
/// frozen dataclass `devmm.statistics.MemoryRecord`.
///
/// Python type: `devmm.statistics.MemoryRecord`
pub(crate) struct MemoryRecord(devmm::statistics::MemoryRecord);

impl<'py> IntoPyObject<'py> for MemoryRecord {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Self::Output> {
        let r = self.0;
        record_class(py, "MemoryRecord")?.call1((r.num_calls, r.memory_total, r.memory_peak))
    }
}

/// Per-name memory records that `profiler` fills; thread-safe.
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
    fn add(&self, name: &str, data: StatisticsRecord) {
        self.inner.add(name, &data.0);
    }

    /// The records, by name.
    #[getter]
    fn records(&self) -> BTreeMap<String, MemoryRecord> {
        self.inner
            .records()
            .into_iter()
            .map(|(name, record)| (name, MemoryRecord(record)))
            .collect()
    }

    /// The records as a table, largest first by `ordered_by`
    /// (`"num_calls"`, `"memory_peak"` or `"memory_total"`; else `ValueError`).
    #[pyo3(signature = (ordered_by = "memory_peak"))]
    fn report(&self, ordered_by: &str) -> PyResult<String> {
        let order = ordered_by
            .parse()
            .map_err(|e: devmm::Error| PyValueError::new_err(e.to_string()))?;
        Ok(self.inner.report(order))
    }

    fn __repr__(&self) -> String {
        format!("ProfilerRecords({} names)", self.inner.records().len())
    }
}
