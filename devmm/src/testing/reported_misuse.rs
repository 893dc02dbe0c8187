//! `ReportedMisuse`: a resource that refuses misuse with errors of its own,
//! seen by the conformance suite as one that reports [`Error::Misuse`].

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Mutex, MutexGuard};

use crate::device::Device;
use crate::error::{Error, MisuseKind, Result};
use crate::ptr::DevicePtr;
use crate::resource::{MemoryInfo, MemoryResource};
use crate::stream::Stream;

type IsMisuseFn = dyn Fn(&Error) -> bool + Send + Sync;
type LiveCountFn = dyn Fn() -> Option<usize> + Send + Sync;

/// Tests a resource on its own contract when it refuses misuse in its own
/// terms: a resource written in another language, whose `deallocate`
/// raises that language's error for a pointer it does not know. A refusal
/// `is_misuse` accepts becomes the [`Error::Misuse`]
/// [`mr_conformance`](super::mr_conformance) expects, its kind named from
/// the blocks the resource handed out (freed before: a double free; never:
/// an unknown pointer); the count is the resource's own `live_count`.
///
/// The detection is the resource's: a call it accepts is accepted. Only a
/// wrong size is refused here, before the resource sees it, since that is
/// what a ledger ([`Checked`](crate::Checked)) refuses in front of such a
/// resource in use, and not every allocator can tell.
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
    blocks: Mutex<Blocks>,
}

/// The live blocks (address to size) and the addresses freed since.
#[derive(Default)]
struct Blocks {
    live: HashMap<usize, usize>,
    freed: HashSet<usize>,
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
            blocks: Mutex::default(),
        }
    }

    fn blocks(&self) -> MutexGuard<'_, Blocks> {
        // One insert or remove per update: a poisoned lock is still consistent.
        self.blocks.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn misuse(&self, kind: MisuseKind, ptr: DevicePtr, nbytes: usize) -> Error {
        Error::Misuse {
            kind,
            ptr,
            nbytes,
            device: self.inner.device(),
            resource: format!("{:?}", self.inner),
            test_double: false,
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
        if !ptr.is_null() {
            let mut blocks = self.blocks();
            blocks.freed.remove(&ptr.addr());
            blocks.live.insert(ptr.addr(), nbytes);
        }
        Ok(ptr)
    }

    unsafe fn deallocate(&self, ptr: DevicePtr, nbytes: usize, stream: &Stream) -> Result<()> {
        // The lock is not held across the call: the resource may take
        // locks of its own (an interpreter's) that its allocations need too.
        let live = self.blocks().live.get(&ptr.addr()).copied();
        if let Some(allocated) = live.filter(|&allocated| allocated != nbytes) {
            return Err(self.misuse(MisuseKind::WrongSize { allocated }, ptr, nbytes));
        }
        // SAFETY: forwarded from the caller; what the resource does with a
        // pointer it never handed out is what the suite checks.
        let freed = unsafe { self.inner.deallocate(ptr, nbytes, stream) };
        let mut blocks = self.blocks();
        match freed {
            Ok(()) => {
                blocks.live.remove(&ptr.addr());
                blocks.freed.insert(ptr.addr());
                Ok(())
            }
            Err(err) if live.is_none() && (self.is_misuse)(&err) => {
                let kind = if blocks.freed.contains(&ptr.addr()) {
                    MisuseKind::DoubleFree
                } else {
                    MisuseKind::UnknownPointer
                };
                Err(self.misuse(kind, ptr, nbytes))
            }
            Err(err) => Err(err),
        }
    }

    fn device(&self) -> Device {
        self.inner.device()
    }

    fn stream_ordered(&self) -> bool {
        self.inner.stream_ordered()
    }

    fn guaranteed_alignment(&self) -> usize {
        self.inner.guaranteed_alignment()
    }

    fn available_memory(&self) -> Result<MemoryInfo> {
        self.inner.available_memory()
    }

    fn dereferenceable(&self) -> bool {
        self.inner.dereferenceable()
    }

    /// What is tested: the resource's own refusals.
    fn detects_misuse(&self) -> bool {
        true
    }

    fn live_count(&self) -> Option<usize> {
        (self.live_count)()
    }
}
