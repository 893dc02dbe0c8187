//! Memory statistics as rmm's `rmm.statistics` users know them:
//! [`enable_statistics`], [`get_statistics`], [`push_statistics`] /
//! [`pop_statistics`], the scope guard [`statistics`], and a profiler
//! ([`profile`], [`Profiler`]) that gathers per-name call counts, peak and
//! total bytes into [`ProfilerRecords`], with the figures of the memory
//! pool below the profiled resource when it has one.
//!
//! A scope is a [`StatisticsAdaptor`] over the resource current when it
//! opens, made current for the thread until it closes (a
//! [`using_memory_resource`](crate::using_memory_resource) override). So
//! scopes nest (an inner scope's allocations pass through, and count in,
//! every outer one), stay per thread (threads' scopes never see each
//! other's allocations), and keep counting frees of what they allocated
//! after they close, since each buffer holds the resource it came from.
//!
//! ```
//! use devmm::statistics::{get_statistics, statistics};
//! use devmm::{Device, DeviceBuffer};
//! let outer = statistics(Device::CPU)?;
//! let a = DeviceBuffer::on_device(1000, Device::CPU)?;
//! {
//!     let inner = statistics(Device::CPU)?;
//!     let b = DeviceBuffer::on_device(24, Device::CPU)?;
//!     assert_eq!(get_statistics(Device::CPU)?.unwrap().current_bytes, 24);
//!     drop(b);
//!     assert_eq!(inner.statistics().peak_bytes, 24);
//! }
//! let s = outer.statistics();
//! assert_eq!((s.current_bytes, s.peak_bytes, s.total_bytes), (1000, 1024, 1024));
//! # drop(a);
//! # Ok::<(), devmm::Error>(())
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use crate::adaptor::{Statistics, StatisticsAdaptor};
use crate::device::Device;
use crate::error::Result;
use crate::pool_statistics::PoolStatistics;
use crate::registry::{self, ResourceGuard};
use crate::resource::{MemoryResource, pool_of_chain};

type SharedResource = Arc<dyn MemoryResource>;

/// The statistics adaptor `enable_statistics` and the scopes install.
pub type SharedStatistics = Arc<StatisticsAdaptor<SharedResource>>;

/// Statistics adaptors made here, by the address of the resource the
/// registry hands out, so `get_statistics` can tell whether the current
/// resource is one.
static MADE_HERE: Mutex<Vec<(usize, Weak<StatisticsAdaptor<SharedResource>>)>> =
    Mutex::new(Vec::new());

fn address(mr: &SharedResource) -> usize {
    Arc::as_ptr(mr).cast::<()>() as usize
}

fn adopt(stats: &SharedStatistics) -> SharedResource {
    let shared: SharedResource = Arc::clone(stats) as SharedResource;
    let mut made = MADE_HERE.lock().unwrap_or_else(|e| e.into_inner());
    made.retain(|(_, w)| w.strong_count() > 0);
    made.push((address(&shared), Arc::downgrade(stats)));
    shared
}

fn adaptor_of(mr: &SharedResource) -> Option<SharedStatistics> {
    let made = MADE_HERE.lock().unwrap_or_else(|e| e.into_inner());
    made.iter()
        .rev()
        .filter(|(addr, _)| *addr == address(mr))
        .find_map(|(_, w)| w.upgrade())
}

/// Makes the process-wide current resource of `device` count its
/// allocations: wraps it in a [`StatisticsAdaptor`] unless it already is
/// one made here, and returns the adaptor.
///
/// ```
/// use devmm::statistics::{enable_statistics, get_statistics};
/// use devmm::Device;
/// let stats = enable_statistics(Device::CPU)?;
/// let again = enable_statistics(Device::CPU)?;
/// assert!(std::sync::Arc::ptr_eq(&stats, &again));
/// assert!(get_statistics(Device::CPU)?.is_some());
/// # Ok::<(), devmm::Error>(())
/// ```
pub fn enable_statistics(device: Device) -> Result<SharedStatistics> {
    let current = registry::get_current_memory_resource(device)?;
    if let Some(stats) = adaptor_of(&current) {
        return Ok(stats);
    }
    let stats = Arc::new(StatisticsAdaptor::new(current));
    registry::set_current_memory_resource(adopt(&stats));
    Ok(stats)
}

/// The counters of `device`'s current resource (for this thread), or
/// `None` when it is not a statistics adaptor made by [`enable_statistics`]
/// or a scope.
pub fn get_statistics(device: Device) -> Result<Option<Statistics>> {
    let current = registry::get_current_memory_resource(device)?;
    Ok(adaptor_of(&current).map(|s| s.statistics()))
}

/// An open statistics scope; closes (restoring the resource current
/// before it) when dropped. Not `Send`: the scope belongs to its thread.
#[derive(Debug)]
#[must_use = "the scope closes when the guard drops"]
pub struct StatisticsScope {
    stats: SharedStatistics,
    _guard: ResourceGuard,
}

impl StatisticsScope {
    /// The scope's counters so far.
    pub fn statistics(&self) -> Statistics {
        self.stats.statistics()
    }

    /// The scope's adaptor (it keeps counting frees after the scope closes).
    pub fn adaptor(&self) -> &SharedStatistics {
        &self.stats
    }
}

/// Opens a statistics scope on `device` for this thread: counters start at
/// zero and see every allocation made on the thread until the guard drops.
pub fn statistics(device: Device) -> Result<StatisticsScope> {
    let current = registry::get_current_memory_resource(device)?;
    let stats = Arc::new(StatisticsAdaptor::new(current));
    let guard = registry::using_memory_resource(adopt(&stats));
    Ok(StatisticsScope {
        stats,
        _guard: guard,
    })
}

/// Opens a scope on `device` in the caller's context (this thread, or the
/// installed override scope's context), closed by [`pop_statistics`]: an
/// override of the registry's one chain ([`push_override`](crate::push_override)).
pub fn push_statistics(device: Device) -> Result<()> {
    let current = registry::get_current_memory_resource(device)?;
    let stats = Arc::new(StatisticsAdaptor::new(current));
    registry::push_override(adopt(&stats));
    Ok(())
}

/// Closes the innermost scope [`push_statistics`] opened on `device` in the
/// caller's context and returns its counters, or `None` when none is open.
pub fn pop_statistics(device: Device) -> Option<Statistics> {
    let popped = registry::pop_override(device)?;
    adaptor_of(&popped).map(|stats| stats.statistics())
}

/// What the profiler gathered for one name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryRecord {
    /// Times the named code ran.
    pub num_calls: usize,
    /// Bytes it allocated, over all calls.
    pub memory_total: usize,
    /// The most bytes live at once during any one call.
    pub memory_peak: usize,
}

/// The order of a [`ProfilerRecords::report`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OrderBy {
    /// Most calls first.
    NumCalls,
    /// Highest peak first (rmm's default).
    MemoryPeak,
    /// Most bytes first.
    MemoryTotal,
}

impl std::str::FromStr for OrderBy {
    type Err = crate::Error;

    fn from_str(text: &str) -> Result<OrderBy> {
        match text {
            "num_calls" => Ok(OrderBy::NumCalls),
            "memory_peak" => Ok(OrderBy::MemoryPeak),
            "memory_total" => Ok(OrderBy::MemoryTotal),
            _ => Err(crate::Error::Parse {
                input: text.to_owned(),
                what: "unknown report order",
                expected: "num_calls, memory_peak or memory_total".into(),
            }),
        }
    }
}

/// Per-name memory records, filled by [`profile`] and [`Profiler`];
/// thread-safe.
///
/// ```
/// use devmm::statistics::{profile, OrderBy, ProfilerRecords};
/// use devmm::{Device, DeviceBuffer};
/// let records = ProfilerRecords::new();
/// for n in [100, 300] {
///     profile("load", &records, Device::CPU, || DeviceBuffer::on_device(n, Device::CPU).map(drop))??;
/// }
/// let load = records.records()["load"];
/// assert_eq!((load.num_calls, load.memory_total, load.memory_peak), (2, 400, 300));
/// assert!(records.report(OrderBy::MemoryPeak).contains("load"));
/// # Ok::<(), devmm::Error>(())
/// ```
#[derive(Debug, Default)]
pub struct ProfilerRecords {
    records: Mutex<BTreeMap<String, MemoryRecord>>,
    /// The figures of each pool below a profiled resource when its last
    /// run ended, by the pool's resource as it prints.
    pools: Mutex<BTreeMap<String, PoolStatistics>>,
}

impl ProfilerRecords {
    /// No records yet.
    pub fn new() -> ProfilerRecords {
        ProfilerRecords::default()
    }

    /// Adds one run of `name` that ended with counters `stats`.
    pub fn add(&self, name: &str, stats: &Statistics) {
        let mut records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        let record = records.entry(name.to_owned()).or_default();
        record.num_calls += 1;
        record.memory_total = record.memory_total.saturating_add(stats.total_bytes);
        record.memory_peak = record.memory_peak.max(stats.peak_bytes);
    }

    /// A copy of the records, by name.
    pub fn records(&self) -> BTreeMap<String, MemoryRecord> {
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Records the figures of the pool below `mr` (the first link of its
    /// chain with a pool of its own), as the driver tells them now, under
    /// that link as it prints; returns whether there was one. A profiled
    /// run does this at its end, so each pool shows its figures at the end
    /// of the last run that used it and its high-water marks since it was
    /// made (or its marks were reset). The driver's error, if it cannot
    /// tell the figures, is returned and nothing is recorded.
    ///
    /// ```
    /// use devmm::statistics::ProfilerRecords;
    /// use devmm::{MallocMemoryResource, StatisticsAdaptor};
    /// let records = ProfilerRecords::new();
    /// // Host memory has no pool: nothing to record.
    /// assert!(!records.add_pool(&StatisticsAdaptor::new(MallocMemoryResource::new()))?);
    /// assert!(records.pools().is_empty());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn add_pool(&self, mr: &dyn MemoryResource) -> Result<bool> {
        let Some((pool, figures)) = pool_of_chain(mr) else {
            return Ok(false);
        };
        let figures = figures?;
        let name = format!("{pool:?}");
        let mut pools = self.pools.lock().unwrap_or_else(|e| e.into_inner());
        pools.insert(name, figures);
        Ok(true)
    }

    /// A copy of the pools' figures, by the pool's resource as it prints.
    pub fn pools(&self) -> BTreeMap<String, PoolStatistics> {
        self.pools.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// A table of the records, ordered by `order`, largest first.
    pub fn report(&self, order: OrderBy) -> String {
        let mut rows: Vec<(String, MemoryRecord)> = self.records().into_iter().collect();
        rows.sort_by_key(|(_, r)| {
            std::cmp::Reverse(match order {
                OrderBy::NumCalls => r.num_calls,
                OrderBy::MemoryPeak => r.memory_peak,
                OrderBy::MemoryTotal => r.memory_total,
            })
        });
        let mut out = String::from("Memory Profiling\n================\n\n");
        let name_width = rows.iter().map(|(n, _)| n.len()).max().unwrap_or(4).max(4);
        out.push_str(&format!(
            "{:<name_width$}  {:>10}  {:>14}  {:>14}\n",
            "Name", "ncalls", "peak bytes", "total bytes"
        ));
        for (name, r) in &rows {
            out.push_str(&format!(
                "{name:<name_width$}  {:>10}  {:>14}  {:>14}\n",
                r.num_calls, r.memory_peak, r.memory_total
            ));
        }
        let pools = self.pools();
        if !pools.is_empty() {
            // Fragmentation: memory the pool holds that no block uses.
            out.push_str("\nMemory Pools\n============\n\n");
            let pool_width = pools.keys().map(String::len).max().unwrap_or(4).max(4);
            out.push_str(&format!(
                "{:<pool_width$}  {:>14}  {:>14}  {:>14}  {:>14}  {:>14}\n",
                "Pool",
                "reserved bytes",
                "reserved high",
                "used bytes",
                "used high",
                "fragmentation"
            ));
            for (name, f) in &pools {
                out.push_str(&format!(
                    "{name:<pool_width$}  {:>14}  {:>14}  {:>14}  {:>14}  {:>14}\n",
                    f.reserved_bytes,
                    f.reserved_high_bytes,
                    f.used_bytes,
                    f.used_high_bytes,
                    f.fragmentation_bytes()
                ));
            }
        }
        out
    }
}

impl fmt::Display for ProfilerRecords {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.report(OrderBy::MemoryPeak))
    }
}

/// The records [`Profiler`]s fill when none are named (rmm's
/// `default_profiler_records`).
pub fn default_profiler_records() -> &'static ProfilerRecords {
    static DEFAULT: OnceLock<ProfilerRecords> = OnceLock::new();
    DEFAULT.get_or_init(ProfilerRecords::new)
}

/// A profiled region: a statistics scope whose counters go into its
/// records under its name when it drops.
#[derive(Debug)]
#[must_use = "the region ends when the profiler drops"]
pub struct Profiler<'r> {
    name: String,
    records: &'r ProfilerRecords,
    scope: StatisticsScope,
}

impl<'r> Profiler<'r> {
    /// Starts profiling `name` on `device` into `records`.
    pub fn start(name: &str, records: &'r ProfilerRecords, device: Device) -> Result<Self> {
        Ok(Profiler {
            name: name.to_owned(),
            records,
            scope: statistics(device)?,
        })
    }
}

impl Drop for Profiler<'_> {
    fn drop(&mut self) {
        self.records.add(&self.name, &self.scope.statistics());
        // A drop cannot return the driver's error: it is logged, and the
        // pool keeps the figures of its last run that could be read.
        if let Err(error) = self.records.add_pool(&**self.scope.adaptor()) {
            tracing::warn!(target: "devmm::statistics", %error, name = %self.name, "the profiled pool's figures could not be read");
        }
    }
}

/// Runs `f` as the profiled region `name` on `device`.
pub fn profile<T>(
    name: &str,
    records: &ProfilerRecords,
    device: Device,
    f: impl FnOnce() -> T,
) -> Result<T> {
    let _region = Profiler::start(name, records, device)?;
    Ok(f())
}
