//! `ReportedMisuse`: a resource that refuses misuse with errors of its own,
//! seen by the conformance suite as one that reports [`Error::Misuse`].

use std::fmt;

use crate::error::{Error, MisuseKind, Result};
use crate::ledger::{Ledger, misuse_of};
use crate::ptr::DevicePtr;
use crate::resource::MemoryResource;
use crate::stream::Stream;

type IsMisuseFn = dyn Fn(&Error) -> bool + Send + Sync;
type LiveCountFn = dyn Fn() -> Option<usize> + Send + Sync;

/// Tests a resource on its own contract when it refuses misuse in its own
/// terms: a resource written in another language, whose `deallocate`
/// raises that language's error for a pointer it does not know. A refusal
/// `is_misuse` accepts becomes the [`Error::Misuse`]
/// [`mr_conformance`](super::mr_conformance) expects, its kind named by a
/// [`Ledger`] of the blocks the resource handed out (freed before: a double
/// free; never: an unknown pointer); the count is the resource's own
/// `live_count`.
///
/// The detection is the resource's: a call it accepts is accepted. What
/// [`Checked`](crate::Checked) handles in front of such a resource in use
/// is handled here the same way, before the resource sees it: a wrong size
/// is refused (not every allocator can tell, so `misuse_detection`'s
/// wrong-size step checks this adaptor, not the resource), and freeing the
/// null pointer with zero bytes succeeds.
///
/// ```
/// use std::sync::Arc;
/// use devmm::testing::{mr_conformance, MrConformanceOptions, ReportedMisuse};
/// use devmm::{CallbackMemoryResource, Device, Error, HeapMemoryResource, MemoryResource};
/// // A resource refusing a pointer it does not know in its own terms.
/// let own = || {
///     let heap = Arc::new(HeapMemoryResource::new());
///     let (alloc, free, count) = (heap.clone(), heap.clone(), heap);
///     let not_mine = |_| Error::Refused { reason: "not mine".into() };
///     let mr = CallbackMemoryResource::new(
///         Device::CPU,
///         64,
///         move |n, s| alloc.allocate(n, s),
///         // SAFETY: the heap resource checks every pointer and size it is given.
///         move |p, n, s| unsafe { free.deallocate(p, n, s) }.map_err(not_mine),
///     )?
///     .with_dereferenceable_memory(true);
///     let is_misuse = |e: &Error| matches!(e, Error::Refused { .. });
///     Ok(ReportedMisuse::new(mr, is_misuse, move || count.live_count()))
/// };
/// let report = mr_conformance(own, &MrConformanceOptions::new());
/// assert!(report.is_ok(), "{report}");
/// # Ok::<(), Error>(())
/// ```
pub struct ReportedMisuse<M> {
    inner: M,
    is_misuse: Box<IsMisuseFn>,
    live_count: Box<LiveCountFn>,
    /// What the resource handed out, to name what a refusal refused.
    ledger: Ledger,
}

impl<M: MemoryResource> ReportedMisuse<M> {
    /// `inner`, whose refusals `is_misuse` tells apart from its other
    /// errors, counting its live allocations with `live_count`.
    pub fn new(
        inner: M,
        is_misuse: impl Fn(&Error) -> bool + Send + Sync + 'static,
        live_count: impl Fn() -> Option<usize> + Send + Sync + 'static,
    ) -> ReportedMisuse<M> {
        ReportedMisuse {
            inner,
            is_misuse: Box::new(is_misuse),
            live_count: Box::new(live_count),
            ledger: Ledger::new(),
        }
    }
}

/// The resource under test, as its own name: reports name it, not this.
impl<M: fmt::Debug> fmt::Debug for ReportedMisuse<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

impl<M: MemoryResource> MemoryResource for ReportedMisuse<M> {
    fn allocate(&self, nbytes: usize, stream: &Stream) -> Result<DevicePtr> {
        let ptr = self.inner.allocate(nbytes, stream)?;
        self.ledger.record(ptr, nbytes);
        Ok(ptr)
    }

    unsafe fn deallocate(&self, ptr: DevicePtr, nbytes: usize, stream: &Stream) -> Result<()> {
        // Taken out first, as `Checked` does: an address the resource
        // hands out again meanwhile is recorded afresh.
        let taken = self.ledger.take(ptr, nbytes);
        match taken {
            Ok(()) if ptr.is_null() => return Ok(()),
            Err(kind @ MisuseKind::WrongSize { .. }) => {
                return Err(misuse_of(self, kind, ptr, nbytes));
            }
            _ => {}
        }
        // SAFETY: forwarded from the caller; what the resource does with a
        // pointer it never handed out, or handed out and took back, is what
        // the suite checks.
        let freed = unsafe { self.inner.deallocate(ptr, nbytes, stream) };
        match (taken, freed) {
            (_, Ok(())) => Ok(()),
            (Ok(()), Err(err)) => {
                // Still allocated: the caller may retry.
                self.ledger.record(ptr, nbytes);
                Err(err)
            }
            (Err(kind), Err(err)) if (self.is_misuse)(&err) => {
                Err(misuse_of(self, kind, ptr, nbytes))
            }
            (Err(_), Err(err)) => Err(err),
        }
    }

    crate::resource::forward_transparent_probes!(inner);

    /// What is tested: the resource's own refusals.
    fn detects_misuse(&self) -> bool {
        true
    }

    fn live_count(&self) -> Option<usize> {
        (self.live_count)()
    }
}
