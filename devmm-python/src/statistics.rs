//! `devmm.statistics`' native part: the counters of a statistics adaptor
//! and the profiler's records, whose arithmetic and report live in the
//! core (`devmm::statistics`).

use std::collections::BTreeMap;
use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// A statistics adaptor's counters at one moment, with rmm's names
/// (`current_bytes`, `current_count`, `peak_bytes`, `total_bytes`,
/// `total_count`) and devmm's (`allocations`, `deallocations`).
#[pyclass(frozen, eq, name = "Statistics", module = "devmm.statistics")]
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct PyStatistics {
    pub(crate) inner: devmm::Statistics,
}

#[pymethods]
impl PyStatistics {
    /// Bytes allocated and not yet deallocated.
    #[getter]
    fn current_bytes(&self) -> usize {
        self.inner.current_bytes
    }

    /// Allocations not yet deallocated.
    #[getter]
    fn current_count(&self) -> usize {
        self.inner
            .allocations
            .saturating_sub(self.inner.deallocations)
    }

    /// The most bytes live at once.
    #[getter]
    fn peak_bytes(&self) -> usize {
        self.inner.peak_bytes
    }

    /// Bytes ever allocated.
    #[getter]
    fn total_bytes(&self) -> usize {
        self.inner.total_bytes
    }

    /// Allocations ever made (rmm's name for `allocations`).
    #[getter]
    fn total_count(&self) -> usize {
        self.inner.allocations
    }

    /// Successful allocations.
    #[getter]
    fn allocations(&self) -> usize {
        self.inner.allocations
    }

    /// Successful deallocations.
    #[getter]
    fn deallocations(&self) -> usize {
        self.inner.deallocations
    }

    fn __repr__(&self) -> String {
        let s = &self.inner;
        format!(
            "Statistics(current_bytes={}, peak_bytes={}, total_bytes={}, allocations={}, deallocations={})",
            s.current_bytes, s.peak_bytes, s.total_bytes, s.allocations, s.deallocations
        )
    }
}

/// What the profiler gathered for one name: `num_calls`, `memory_total`
/// (bytes allocated over all calls) and `memory_peak` (the most live at
/// once during any call).
#[pyclass(frozen, eq, name = "MemoryRecord", module = "devmm.statistics")]
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct PyMemoryRecord {
    inner: devmm::statistics::MemoryRecord,
}

#[pymethods]
impl PyMemoryRecord {
    /// Times the named code ran.
    #[getter]
    fn num_calls(&self) -> usize {
        self.inner.num_calls
    }

    /// Bytes it allocated, over all calls.
    #[getter]
    fn memory_total(&self) -> usize {
        self.inner.memory_total
    }

    /// The most bytes live at once during any one call.
    #[getter]
    fn memory_peak(&self) -> usize {
        self.inner.memory_peak
    }

    fn __repr__(&self) -> String {
        let r = &self.inner;
        format!(
            "MemoryRecord(num_calls={}, memory_total={}, memory_peak={})",
            r.num_calls, r.memory_total, r.memory_peak
        )
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
    fn add(&self, name: &str, data: &PyStatistics) {
        self.inner.add(name, &data.inner);
    }

    /// The records, by name.
    #[getter]
    fn records(&self) -> BTreeMap<String, PyMemoryRecord> {
        self.inner
            .records()
            .into_iter()
            .map(|(name, inner)| (name, PyMemoryRecord { inner }))
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
