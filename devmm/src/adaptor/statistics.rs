use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::{Error, Result};
use crate::ptr::DevicePtr;
use crate::resource::{MemoryInfo, MemoryResource, resource_chain};
use crate::stream::Stream;

/// A snapshot of a [`StatisticsAdaptor`]'s counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Statistics {
    /// Bytes allocated and not yet deallocated.
    pub current_bytes: usize,
    /// The most `current_bytes` has been.
    pub peak_bytes: usize,
    /// Bytes ever allocated.
    pub total_bytes: usize,
    /// Successful allocations.
    pub allocations: usize,
    /// Successful deallocations.
    pub deallocations: usize,
}

/// Counts bytes and calls through its upstream.
///
/// Counters are atomics, exact under any number of threads.
///
/// ```
/// use devmm::{MallocMemoryResource, MemoryResource, StatisticsAdaptor, Stream};
/// let stats = StatisticsAdaptor::new(MallocMemoryResource::new());
/// let s = Stream::cpu();
/// let p = stats.allocate(64, &s)?;
/// assert_eq!((stats.current_bytes(), stats.total_bytes()), (64, 64));
/// unsafe { stats.deallocate(p, 64, &s)? };
/// assert_eq!(stats.current_bytes(), 0);
/// assert_eq!(stats.peak_bytes(), 64);
/// # Ok::<(), devmm::Error>(())
/// ```
#[derive(Debug)]
// On cache lines of its own: every call does locked read-modify-writes on
// the counters, and when the adaptor (a small heap block) shared a line
// with the allocator's chunk headers, which malloc and free write, each of
// those waited. 64-byte pairs through Statistics(Limiting(Malloc)) took
// 2.5x the raw call, and 1.0x once aligned (docs/benchmarks.md).
#[repr(align(64))]
pub struct StatisticsAdaptor<U> {
    upstream: U,
    current: AtomicUsize,
    peak: AtomicUsize,
    total: AtomicUsize,
    allocations: AtomicUsize,
    deallocations: AtomicUsize,
}

impl<U: MemoryResource> StatisticsAdaptor<U> {
    /// Wraps `upstream`, with every counter at zero.
    pub const fn new(upstream: U) -> Self {
        StatisticsAdaptor {
            upstream,
            current: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            total: AtomicUsize::new(0),
            allocations: AtomicUsize::new(0),
            deallocations: AtomicUsize::new(0),
        }
    }

    /// The wrapped resource.
    pub fn get_upstream(&self) -> &U {
        &self.upstream
    }

    /// Bytes allocated and not yet deallocated.
    pub fn current_bytes(&self) -> usize {
        self.current.load(Ordering::Relaxed)
    }

    /// The most bytes live at once.
    pub fn peak_bytes(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    /// Bytes ever allocated.
    pub fn total_bytes(&self) -> usize {
        self.total.load(Ordering::Relaxed)
    }

    /// Starts a new peak window: the peak becomes the bytes live now, as
    /// PyTorch's `reset_peak_memory_stats` does for its allocator.
    ///
    /// ```
    /// use devmm::{MallocMemoryResource, MemoryResource, StatisticsAdaptor, Stream};
    /// let stats = StatisticsAdaptor::new(MallocMemoryResource::new());
    /// let s = Stream::cpu();
    /// let p = stats.allocate(64, &s)?;
    /// unsafe { stats.deallocate(p, 64, &s)? };
    /// stats.reset_peak();
    /// assert_eq!(stats.peak_bytes(), 0);
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn reset_peak(&self) {
        self.peak.store(self.current_bytes(), Ordering::Relaxed);
        // An allocation racing the store may have raised `current` past
        // what was stored; settle the peak on what is live now.
        self.peak.fetch_max(self.current_bytes(), Ordering::Relaxed);
    }

    /// All counters at once.
    pub fn statistics(&self) -> Statistics {
        Statistics {
            current_bytes: self.current_bytes(),
            peak_bytes: self.peak_bytes(),
            total_bytes: self.total_bytes(),
            allocations: self.allocations.load(Ordering::Relaxed),
            deallocations: self.deallocations.load(Ordering::Relaxed),
        }
    }
}

impl<U: MemoryResource> StatisticsAdaptor<U> {
    /// Adds `nbytes` to `current` and `total`, returning the new current
    /// bytes, or (with no counter changed) the name of the one that would
    /// overflow.
    fn count_allocation(&self, nbytes: usize) -> Result<usize, &'static str> {
        let add = |counter: &AtomicUsize, name| {
            counter
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
                    c.checked_add(nbytes)
                })
                .map_err(|_| name)
        };
        // `checked_add` succeeded, so this sum cannot overflow.
        let now = add(&self.current, "current_bytes")? + nbytes;
        if let Err(name) = add(&self.total, "total_bytes") {
            super::saturating_sub(&self.current, nbytes);
            return Err(name);
        }
        Ok(now)
    }
}

impl<U: MemoryResource> MemoryResource for StatisticsAdaptor<U> {
    fn allocate(&self, nbytes: usize, stream: &Stream) -> Result<DevicePtr> {
        let ptr = self
            .upstream
            .allocate(nbytes, stream)
            .map_err(|e| e.through("StatisticsAdaptor"))?;
        let now = match self.count_allocation(nbytes) {
            Ok(now) => now,
            Err(counter) => {
                // SAFETY: `ptr` was just allocated upstream with `nbytes`
                // and never handed out.
                let _ = unsafe { self.upstream.deallocate(ptr, nbytes, stream) };
                return Err(Error::CounterOverflow {
                    device: self.device(),
                    nbytes,
                    counter,
                    chain: resource_chain(self),
                });
            }
        };
        // Most allocations do not set a new peak; a plain load spares them
        // the locked read-modify-write, and `fetch_max` still settles races.
        if now > self.peak.load(Ordering::Relaxed) {
            self.peak.fetch_max(now, Ordering::Relaxed);
        }
        self.allocations.fetch_add(1, Ordering::Relaxed);
        Ok(ptr)
    }

    unsafe fn deallocate(&self, ptr: DevicePtr, nbytes: usize, stream: &Stream) -> Result<()> {
        super::check_deallocation(self, ptr, nbytes)?;
        // SAFETY: forwarded verbatim; the caller upholds the contract.
        unsafe { self.upstream.deallocate(ptr, nbytes, stream)? };
        super::saturating_sub(&self.current, nbytes);
        self.deallocations.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    forward_probes!(upstream);

    fn available_memory(&self) -> Result<MemoryInfo> {
        self.upstream.available_memory()
    }
}
