//! A pool's figures as a `devmm.statistics.PoolStatistics`: a value
//! conversion below the error conversions (`devmm.OutOfMemoryError` carries
//! the pool's figures), apart from the rest of `statistics`.

use pyo3::prelude::*;

use crate::value_class::ValueClass;

/// The dataclass that carries a pool's figures.
static POOL_STATISTICS: ValueClass<()> = ValueClass::new("devmm.statistics", "PoolStatistics");

/// A pool's figures as a `devmm.statistics.PoolStatistics`.
pub(crate) fn pool_statistics_object<'py>(
    py: Python<'py>,
    figures: &devmm::PoolStatistics,
) -> PyResult<Bound<'py, PyAny>> {
    let f = figures;
    let fields = (
        f.reserved_bytes,
        f.reserved_high_bytes,
        f.used_bytes,
        f.used_high_bytes,
    );
    POOL_STATISTICS.class(py)?.call1(fields)
}
