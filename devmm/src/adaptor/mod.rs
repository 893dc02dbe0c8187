//! Adaptors: resources that wrap an upstream resource they own and add one
//! behaviour (counting, limiting, logging, tracing, tracking, recovering
//! from running out, prefetching managed memory) while forwarding the rest.
//!
//! They compose in any order over any resource, including
//! `Arc<dyn MemoryResource>`, so the whole chain lives as long as the
//! outermost adaptor and every buffer allocated through it.

/// The probes an adaptor forwards unchanged to the field `$field`:
/// everything but `allocate`, `deallocate` and `available_memory`. The
/// fixed ones are answered from the adaptor's [`UpstreamProbes`] `$probes`.
macro_rules! forward_probes {
    ($field:ident: $upstream:ty, $probes:ident) => {
        fn nesting_bound() -> Option<usize>
        where
            Self: Sized,
        {
            <$upstream as $crate::MemoryResource>::nesting_bound()?.checked_add(1)
        }

        fn device(&self) -> $crate::Device {
            self.$probes.of(&self.$field).device
        }

        fn stream_ordered(&self) -> bool {
            self.$probes.of(&self.$field).stream_ordered
        }

        fn guaranteed_alignment(&self) -> usize {
            self.$probes.of(&self.$field).guaranteed_alignment
        }

        fn dereferenceable(&self) -> bool {
            self.$probes.of(&self.$field).dereferenceable
        }

        fn upstream(&self) -> Option<&dyn $crate::MemoryResource> {
            Some(&self.$field)
        }

        fn detects_misuse(&self) -> bool {
            self.$probes.of(&self.$field).detects_misuse
        }

        fn live_count(&self) -> Option<usize> {
            self.$field.live_count()
        }

        fn managed_memory(&self) -> Option<&dyn $crate::managed_memory::ManagedMemory> {
            self.$field.managed_memory()
        }

        /// An adaptor hands out its upstream's pointers unchanged, so the
        /// upstream's driver handle names the same allocation.
        fn ipc_handle(
            &self,
            ptr: $crate::DevicePtr,
            nbytes: usize,
        ) -> Option<$crate::Result<$crate::ipc_data::IpcMemHandle>> {
            self.$field.ipc_handle(ptr, nbytes)
        }
    };
}

/// An adaptor's copy of its upstream's fixed answers: device, alignment,
/// stream ordering, dereferenceability, misuse detection. An upstream
/// adaptor forwards its own probes in turn, so asking afresh walked the
/// whole chain on every probe, and building a chain of `n` adaptors (each
/// asked its device as it is made) cost `n²` steps. A resource's answers
/// never change, so the first probe takes one copy and later ones read it:
/// each answer costs one step, however deep the chain.
#[derive(Default)]
pub(crate) struct UpstreamProbes(std::sync::OnceLock<Probes>);

/// The answers [`UpstreamProbes`] keeps.
#[derive(Clone, Copy)]
pub(crate) struct Probes {
    pub(crate) device: crate::Device,
    pub(crate) stream_ordered: bool,
    pub(crate) guaranteed_alignment: usize,
    pub(crate) dereferenceable: bool,
    pub(crate) detects_misuse: bool,
}

impl UpstreamProbes {
    /// None taken yet (`const`, for adaptors made in statics).
    pub(crate) const fn new() -> Self {
        UpstreamProbes(std::sync::OnceLock::new())
    }

    /// The answers of `upstream`, which must be the one adaptor field they
    /// are asked for each time.
    ///
    /// A chain built without asking would be asked down its whole depth
    /// at once, one native frame group per link: past
    /// [`upstream::MAX_NESTED_LINKS`] the links below are asked first, from
    /// the base up, each then answering from the one below it.
    #[inline]
    pub(crate) fn of<R: crate::MemoryResource>(&self, upstream: &R) -> &Probes {
        self.0.get_or_init(|| {
            upstream::one_link_deeper::<R, _>(|| Probes::of(upstream)).unwrap_or_else(|| {
                upstream::unnested(|| {
                    ask_from_the_base_up(upstream);
                    Probes::of(upstream)
                })
            })
        })
    }
}

impl Probes {
    /// Asks `upstream`.
    fn of(upstream: &impl crate::MemoryResource) -> Probes {
        Probes {
            device: upstream.device(),
            stream_ordered: upstream.stream_ordered(),
            guaranteed_alignment: upstream.guaranteed_alignment(),
            dereferenceable: upstream.dereferenceable(),
            detects_misuse: upstream.detects_misuse(),
        }
    }
}

/// Asks each link below `upstream` its device, the deepest first, so each
/// takes its answers from a link that has them.
#[cold]
#[inline(never)]
fn ask_from_the_base_up(upstream: &dyn crate::MemoryResource) {
    let mut below = Vec::new();
    let mut link = upstream.upstream();
    while let Some(next) = link {
        below.push(next);
        link = next.upstream();
    }
    for link in below.iter().rev() {
        link.device();
    }
}

impl std::fmt::Debug for UpstreamProbes {
    // The upstream's own `Debug` says all of it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("..")
    }
}

/// Refuses `deallocate(NULL, n > 0)` before it reaches an adaptor's
/// counters, by the rule every resource applies ([`check_null`]): such a
/// call frees nothing and would skew the counts. `deallocate(NULL, 0)` is
/// forwarded, so a zero-byte allocation is counted both ways.
///
/// Inlined, with the error built out of line: on every free this is a
/// null test, where a call returning the whole `Result<(), Error>` through
/// memory cost 27 instructions (docs/benchmarks.md).
///
/// [`check_null`]: crate::ledger::check_null
#[inline(always)]
fn check_deallocation(
    mr: &dyn crate::MemoryResource,
    ptr: crate::DevicePtr,
    nbytes: usize,
) -> crate::Result<()> {
    match crate::ledger::check_null(ptr, nbytes) {
        Ok(_) => Ok(()),
        Err(kind) => Err(refused_deallocation(mr, kind, ptr, nbytes)),
    }
}

/// A counting adaptor's `deallocate`: the free upstream, then `count` of
/// `nbytes`. `deallocate(NULL, nbytes)` takes a path of its own, out of
/// line: refused by [`check_deallocation`]'s rule when `nbytes > 0`, else
/// forwarded and counted (so a zero-byte allocation is counted both ways).
///
/// The fast path is then one null test, after which the upstream's own
/// null check folds away (docs/benchmarks.md).
///
/// # Safety
///
/// [`MemoryResource::deallocate`](crate::MemoryResource::deallocate)'s,
/// for `upstream`.
#[inline(always)]
unsafe fn deallocate_counted<U: crate::MemoryResource>(
    mr: &dyn crate::MemoryResource,
    upstream: &U,
    ptr: crate::DevicePtr,
    nbytes: usize,
    stream: &crate::Stream,
    count: impl FnOnce(usize),
) -> crate::Result<()> {
    // By value: the captures are copied only on the cold path that takes
    // the closure.
    let forward = move || {
        // SAFETY: forwarded verbatim; the caller upholds the contract.
        unsafe { upstream.deallocate(ptr, nbytes, stream)? };
        count(nbytes);
        Ok(())
    };
    if ptr.is_null() {
        return deallocate_null(mr, nbytes, forward);
    }
    forward()
}

/// [`deallocate_counted`]'s null path.
#[cold]
#[inline(never)]
fn deallocate_null(
    mr: &dyn crate::MemoryResource,
    nbytes: usize,
    forward: impl FnOnce() -> crate::Result<()>,
) -> crate::Result<()> {
    check_deallocation(mr, crate::DevicePtr::NULL, nbytes)?;
    forward()
}

#[cold]
#[inline(never)]
fn refused_deallocation(
    mr: &dyn crate::MemoryResource,
    kind: crate::MisuseKind,
    ptr: crate::DevicePtr,
    nbytes: usize,
) -> crate::Error {
    crate::Error::Misuse {
        kind,
        ptr,
        nbytes,
        device: mr.device(),
        resource: crate::resource_chain(mr),
        test_double: false,
    }
}

/// [`Error::through`](crate::Error), out of line: an adaptor's fast path
/// then keeps no registers for its upstream's failure.
#[cold]
#[inline(never)]
fn failed_through(error: crate::Error, adaptor: &str) -> crate::Error {
    error.through(adaptor)
}

/// Subtracts `n` from a counter without wrapping: a caller that frees more
/// than it allocated through a resource that cannot tell leaves the counter
/// at zero rather than near `usize::MAX`.
#[inline]
fn saturating_sub(counter: &std::sync::atomic::AtomicUsize, n: usize) {
    let order = std::sync::atomic::Ordering::Relaxed;
    let _ = counter.fetch_update(order, order, |c| Some(c.saturating_sub(n)));
}

mod failure_callback;
mod limiting;
mod logging;
mod prefetch;
mod statistics;
mod trace;
mod tracking;
pub(crate) mod upstream;

pub use failure_callback::FailureCallbackAdaptor;
pub use limiting::LimitingAdaptor;
pub use logging::{LOG_TARGET, LogRecord, LogValue, LoggingAdaptor};
pub use prefetch::PrefetchAdaptor;
pub use statistics::{Statistics, StatisticsAdaptor};
pub use trace::TraceAdaptor;
pub use tracking::{
    DEFAULT_TRACKING_DEPTH, LEAK_REPORT_ENV, LeakReport, LiveAllocation, SiteGroup,
    TrackingAdaptor, print_leak_reports,
};
