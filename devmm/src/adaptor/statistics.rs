use std::fmt;

use crate::error::{Error, Result};
use crate::ptr::DevicePtr;
use crate::resource::{MemoryInfo, MemoryResource, resource_chain};
use crate::stream::Stream;

mod shards;

use shards::ShardedCounts;

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
/// Every counter is exact under any number of threads, the peak included,
/// and a snapshot is exact even while other threads allocate. Threads count
/// in shards of their own, so they do not slow each other down (see
/// docs/adr/0020 for how the peak stays exact).
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
pub struct StatisticsAdaptor<U> {
    upstream: super::upstream::Upstream<U>,
    counts: ShardedCounts,
    probes: super::UpstreamProbes,
}

impl<U> fmt::Debug for StatisticsAdaptor<U>
where
    U: fmt::Debug,
{
    // No counters: reading them takes the shards' locks, and errors built
    // inside the adaptor format it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StatisticsAdaptor")
            .field("upstream", &self.upstream)
            .finish_non_exhaustive()
    }
}

impl<U: MemoryResource> StatisticsAdaptor<U> {
    /// Wraps `upstream`, with every counter at zero.
    pub const fn new(upstream: U) -> Self {
        StatisticsAdaptor {
            upstream: super::upstream::Upstream::new(upstream),
            counts: ShardedCounts::new(),
            probes: super::UpstreamProbes::new(),
        }
    }

    /// The wrapped resource.
    pub fn get_upstream(&self) -> &U {
        &self.upstream
    }

    /// Bytes allocated and not yet deallocated.
    pub fn current_bytes(&self) -> usize {
        self.statistics().current_bytes
    }

    /// The most bytes live at once.
    pub fn peak_bytes(&self) -> usize {
        self.counts.peak()
    }

    /// Bytes ever allocated.
    pub fn total_bytes(&self) -> usize {
        self.statistics().total_bytes
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
        self.counts.reset_peak();
    }

    /// All counters at one instant.
    pub fn statistics(&self) -> Statistics {
        self.counts.snapshot()
    }
}

impl<U: MemoryResource> StatisticsAdaptor<U> {
    /// Counts what [`ShardedCounts::try_allocate`] did not, or gives back
    /// what was just allocated upstream when counting it would overflow a
    /// counter, and says so. Out of line, and the caller's last call: its
    /// fast path keeps no registers for it.
    #[cold]
    #[inline(never)]
    fn allocate_counted_slow(
        &self,
        ptr: DevicePtr,
        nbytes: usize,
        stream: &Stream,
    ) -> Result<DevicePtr> {
        let Err(counter) = self.counts.allocate_slow(nbytes) else {
            return Ok(ptr);
        };
        // SAFETY: `ptr` was just allocated upstream with `nbytes` and
        // never handed out.
        let _ = unsafe { self.upstream.deallocate(ptr, nbytes, stream) };
        Err(Error::CounterOverflow {
            device: self.device(),
            nbytes,
            counter,
            chain: resource_chain(self),
        })
    }
}

impl<U: MemoryResource> MemoryResource for StatisticsAdaptor<U> {
    fn allocate(&self, nbytes: usize, stream: &Stream) -> Result<DevicePtr> {
        let ptr = match self.upstream.allocate(nbytes, stream) {
            Ok(ptr) => ptr,
            Err(e) => return Err(super::failed_through(e, "StatisticsAdaptor")),
        };
        if self.counts.try_allocate(nbytes) {
            return Ok(ptr);
        }
        self.allocate_counted_slow(ptr, nbytes, stream)
    }

    unsafe fn deallocate(&self, ptr: DevicePtr, nbytes: usize, stream: &Stream) -> Result<()> {
        // SAFETY: the caller upholds the contract.
        unsafe {
            super::deallocate_counted(self, &self.upstream, ptr, nbytes, stream, |n| {
                self.counts.deallocate(n)
            })
        }
    }

    forward_probes!(upstream: U, probes);

    fn available_memory(&self) -> Result<MemoryInfo> {
        self.upstream.available_memory()
    }
}
