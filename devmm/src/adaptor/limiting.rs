use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::{Error, Result};
use crate::ptr::DevicePtr;
use crate::resource::{MemoryInfo, MemoryResource, resource_chain};
use crate::stream::Stream;

/// Refuses allocations that would take its usage past `limit_bytes`,
/// without calling upstream.
///
/// ```
/// use devmm::{Error, LimitingAdaptor, MallocMemoryResource, MemoryResource, Stream};
/// let mr = LimitingAdaptor::new(MallocMemoryResource::new(), 64);
/// let s = Stream::cpu();
/// let p = mr.allocate(64, &s)?;
/// assert!(matches!(mr.allocate(1, &s), Err(Error::LimitExceeded { in_use: 64, .. })));
/// unsafe { mr.deallocate(p, 64, &s)? };
/// # Ok::<(), devmm::Error>(())
/// ```
#[derive(Debug)]
// Its own cache lines, for the reason given on `StatisticsAdaptor`.
#[repr(align(64))]
pub struct LimitingAdaptor<U> {
    upstream: super::upstream::Upstream<U>,
    limit: usize,
    used: AtomicUsize,
    probes: super::UpstreamProbes,
}

impl<U: MemoryResource> LimitingAdaptor<U> {
    /// Wraps `upstream` with a budget of `limit_bytes`.
    pub fn new(upstream: U, limit_bytes: usize) -> Self {
        LimitingAdaptor {
            upstream: super::upstream::Upstream::new(upstream),
            limit: limit_bytes,
            used: AtomicUsize::new(0),
            probes: super::UpstreamProbes::new(),
        }
    }

    /// The wrapped resource.
    pub fn get_upstream(&self) -> &U {
        &self.upstream
    }

    /// The budget.
    pub fn limit_bytes(&self) -> usize {
        self.limit
    }

    /// Bytes allocated through the adaptor and not yet deallocated.
    pub fn used_bytes(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }
}

impl<U: MemoryResource> LimitingAdaptor<U> {
    /// The refusal, built out of line: the fast path keeps no registers
    /// for it.
    #[cold]
    #[inline(never)]
    fn limit_exceeded(&self, nbytes: usize, in_use: usize) -> Error {
        Error::LimitExceeded {
            device: self.device(),
            nbytes,
            limit: self.limit,
            in_use,
            chain: resource_chain(self),
        }
    }

    /// Gives back the reservation of an allocation upstream refused.
    #[cold]
    #[inline(never)]
    fn failed_upstream(&self, nbytes: usize, error: Error) -> Error {
        self.used.fetch_sub(nbytes, Ordering::Relaxed);
        error.through("LimitingAdaptor")
    }
}

impl<U: MemoryResource> MemoryResource for LimitingAdaptor<U> {
    // Always inlined into the adaptor above it: a frame per layer costs
    // about 25 instructions a call, for the size of the `Result`
    // (docs/benchmarks.md).
    #[inline(always)]
    fn allocate(&self, nbytes: usize, stream: &Stream) -> Result<DevicePtr> {
        // Reserve first so concurrent callers cannot overshoot together.
        let reserved = self
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                used.checked_add(nbytes)
                    .filter(|&total| total <= self.limit)
            });
        if let Err(in_use) = reserved {
            return Err(self.limit_exceeded(nbytes, in_use));
        }
        match self.upstream.allocate(nbytes, stream) {
            Ok(ptr) => Ok(ptr),
            Err(e) => Err(self.failed_upstream(nbytes, e)),
        }
    }

    #[inline(always)]
    unsafe fn deallocate(&self, ptr: DevicePtr, nbytes: usize, stream: &Stream) -> Result<()> {
        // SAFETY: the caller upholds the contract.
        unsafe {
            super::deallocate_counted(self, &self.upstream, ptr, nbytes, stream, |n| {
                super::saturating_sub(&self.used, n)
            })
        }
    }

    forward_probes!(upstream: U, probes);

    fn available_memory(&self) -> Result<MemoryInfo> {
        let upstream = self.upstream.available_memory()?;
        let budget = self.limit.saturating_sub(self.used_bytes());
        Ok(MemoryInfo {
            free: budget.min(upstream.free),
            total: self.limit.min(upstream.total),
        })
    }
}
