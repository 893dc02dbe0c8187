//! An adaptor's link to its upstream: calls through it are counted, so a
//! chain too deep for the native stack is refused with
//! [`Error::ChainTooDeep`] rather than overflowing it, and letting go of it
//! takes a bounded stack however deep the chain below.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::ptr::NonNull;

use crate::{DevicePtr, Error, MemoryInfo, MemoryResource, Result, Stream};

/// The most adaptor links one call goes through on a thread. Each takes a
/// few native frames (about 1 KiB in a debug build): 512 of them fit a
/// 2 MiB thread stack with room for the caller, and no real chain comes
/// near (rmm's are a handful deep).
pub(crate) const MAX_NESTED_LINKS: usize = 512;

/// The most links a call into an upstream may nest, known from its type
/// ([`MemoryResource::nesting_bound`]), for calls into it to go uncounted.
/// Only the chain's base can be uncounted: a link above a type-erased
/// upstream has no bound, so a call nests at most [`MAX_NESTED_LINKS`]
/// counted links and then this many more.
const MAX_UNCOUNTED_LINKS: usize = 16;

/// Links let go of inline, one inside another, before the rest of a chain
/// is queued for the outermost drop: deep enough that an ordinary chain
/// never allocates a queue, shallow enough for any stack.
const INLINE_DROPS: usize = 64;

thread_local! {
    /// Adaptor links the calls on this thread are nested in now. Const and
    /// without a destructor: usable inside a global allocator.
    static NESTED: Cell<usize> = const { Cell::new(0) };
    /// Upstream drops nested in this thread's drops now.
    static DROPPING: Cell<usize> = const { Cell::new(0) };
    /// Upstreams waiting for the outermost drop to let them go.
    static DEFERRED: RefCell<Vec<Deferred>> = const { RefCell::new(Vec::new()) };
}

/// The upstream field of an adaptor: the resource itself, answering as it
/// does (transparent in a resource chain and in `Debug`), with the calls
/// that walk down the chain counted, and a drop that does not nest.
pub(crate) struct Upstream<U>(ManuallyDrop<U>);

impl<U> Upstream<U> {
    /// Holds `upstream` (`const`, for adaptors made in statics).
    pub(crate) const fn new(upstream: U) -> Self {
        Upstream(ManuallyDrop::new(upstream))
    }
}

impl<U> Deref for Upstream<U> {
    type Target = U;

    fn deref(&self) -> &U {
        &self.0
    }
}

impl<U: fmt::Debug> fmt::Debug for Upstream<U> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        U::fmt(self, f)
    }
}

/// Resets the nesting count when a nested call ends, unwinding included.
struct Restore(&'static std::thread::LocalKey<Cell<usize>>, usize);

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = self.0.try_with(|nested| nested.set(self.1));
    }
}

/// One adaptor link deeper on this thread for as long as it lives.
struct Deeper {
    /// This thread's count, reached once: each reach of a thread-local is
    /// a call in a shared object's code, three a link where it was reached
    /// for the read, the write and the restore. Null for a link into an
    /// upstream whose type bounds its depth, which is not counted.
    nested: *const Cell<usize>,
    /// The count to restore.
    restore: usize,
}

impl Deeper {
    /// Enters one link into an upstream of type `U`, or `None` when
    /// [`MAX_NESTED_LINKS`] are nested already. A guard rather than a
    /// closure, so that the hot paths return their `Result` straight from
    /// the upstream's call: wrapped in an `Option` or returned through a
    /// closure, the large `Result` was copied at every link (1,003 instead
    /// of 806 instructions for a two-link chain's 64-byte pair).
    ///
    /// A link into an upstream whose type bounds its depth
    /// ([`MAX_UNCOUNTED_LINKS`]) is not counted: the bound is a constant
    /// once `U` is known, so such a link reads no thread-local at all.
    #[inline(always)]
    fn enter<U: MemoryResource>() -> Option<Deeper> {
        if U::nesting_bound().is_some_and(|links| links < MAX_UNCOUNTED_LINKS) {
            return Some(Deeper {
                nested: std::ptr::null(),
                restore: 0,
            });
        }
        let nested = NESTED.with(|nested| nested as *const Cell<usize>);
        // SAFETY: this thread's count, alive as long as the thread (const,
        // without a destructor); the guard is neither `Send` nor kept past
        // the call it guards, so it is read on this thread only.
        let count = unsafe { (*nested).get() };
        if count >= MAX_NESTED_LINKS {
            return None;
        }
        // SAFETY: as above.
        unsafe { (*nested).set(count + 1) };
        Some(Deeper {
            nested,
            restore: count,
        })
    }
}

impl Drop for Deeper {
    #[inline(always)]
    fn drop(&mut self) {
        if self.nested.is_null() {
            return;
        }
        // SAFETY: as in `enter`: this thread's count, on this thread.
        unsafe { (*self.nested).set(self.restore) };
    }
}

/// Runs `call` one link deeper into an upstream of type `U`, or `None`
/// when [`MAX_NESTED_LINKS`] are nested already.
#[inline(always)]
pub(crate) fn one_link_deeper<U: MemoryResource, T>(call: impl FnOnce() -> T) -> Option<T> {
    let _deeper = Deeper::enter::<U>()?;
    Some(call())
}

/// Runs `call` as if no link were nested: for work whose depth is bounded
/// some other way.
pub(crate) fn unnested<T>(call: impl FnOnce() -> T) -> T {
    let _restore = Restore(&NESTED, NESTED.replace(0));
    call()
}

impl<U: MemoryResource> Upstream<U> {
    #[cold]
    #[inline(never)]
    fn too_deep(&self, operation: &'static str) -> Error {
        Error::ChainTooDeep {
            operation,
            device: unnested(|| self.device()),
            limit: MAX_NESTED_LINKS,
            chain: unnested(|| crate::resource_chain(&**self)),
        }
    }
}

impl<U: MemoryResource> MemoryResource for Upstream<U> {
    #[inline]
    fn allocate(&self, nbytes: usize, stream: &Stream) -> Result<DevicePtr> {
        let Some(_deeper) = Deeper::enter::<U>() else {
            return Err(self.too_deep("allocate"));
        };
        self.0.allocate(nbytes, stream)
    }

    #[inline]
    unsafe fn deallocate(&self, ptr: DevicePtr, nbytes: usize, stream: &Stream) -> Result<()> {
        let Some(_deeper) = Deeper::enter::<U>() else {
            return Err(self.too_deep("deallocate"));
        };
        // SAFETY: forwarded verbatim; the caller upholds the contract.
        unsafe { self.0.deallocate(ptr, nbytes, stream) }
    }

    fn available_memory(&self) -> Result<MemoryInfo> {
        one_link_deeper::<U, _>(|| self.0.available_memory())
            .unwrap_or_else(|| Err(self.too_deep("available_memory")))
    }

    /// Unknown (`None`) through a chain too deep to follow.
    fn live_count(&self) -> Option<usize> {
        one_link_deeper::<U, _>(|| self.0.live_count()).flatten()
    }

    fn managed_memory(&self) -> Option<&dyn crate::ManagedMemory> {
        one_link_deeper::<U, _>(|| self.0.managed_memory()).flatten()
    }

    fn pool_statistics(&self) -> Option<Result<crate::PoolStatistics>> {
        one_link_deeper::<U, _>(|| self.0.pool_statistics()).flatten()
    }

    fn ipc_handle(
        &self,
        ptr: crate::DevicePtr,
        nbytes: usize,
    ) -> Option<Result<crate::ipc_data::IpcMemHandle>> {
        one_link_deeper::<U, _>(|| self.0.ipc_handle(ptr, nbytes)).flatten()
    }

    fn device(&self) -> crate::Device {
        self.0.device()
    }

    fn stream_ordered(&self) -> bool {
        self.0.stream_ordered()
    }

    fn guaranteed_alignment(&self) -> usize {
        self.0.guaranteed_alignment()
    }

    fn dereferenceable(&self) -> bool {
        self.0.dereferenceable()
    }

    fn detects_misuse(&self) -> bool {
        self.0.detects_misuse()
    }

    fn upstream(&self) -> Option<&dyn MemoryResource> {
        self.0.upstream()
    }

    fn runs_callbacks(&self) -> bool {
        self.0.runs_callbacks()
    }

    fn origin(&self) -> Option<&(dyn std::any::Any + Send + Sync)> {
        self.0.origin()
    }

    fn fmt_name(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt_name(f)
    }
}

/// An upstream queued for the outermost drop, boxed, with the drop of its
/// type.
struct Deferred {
    boxed: NonNull<()>,
    drop_boxed: unsafe fn(NonNull<()>),
}

/// Drops the `Box<U>` that `boxed` is.
///
/// # Safety
///
/// `boxed` came from `Box::<U>::into_raw` and is dropped once, here.
unsafe fn drop_boxed<U>(boxed: NonNull<()>) {
    // SAFETY: forwarded from the caller.
    drop(unsafe { Box::from_raw(boxed.cast::<U>().as_ptr()) });
}

impl<U> Drop for Upstream<U> {
    /// Letting go of the last reference to an upstream adaptor lets go of
    /// its upstream in turn, one native frame group per link, so a chain
    /// thousands deep overflowed the stack. Past [`INLINE_DROPS`] nested
    /// drops, an upstream is queued instead, and the outermost drop lets
    /// the queue go one after another.
    fn drop(&mut self) {
        // SAFETY: taken once, here; the field is never used again.
        let upstream = unsafe { ManuallyDrop::take(&mut self.0) };
        let Ok(dropping) = DROPPING.try_with(Cell::get) else {
            // The thread is ending and its queue is gone: inline.
            return drop(upstream);
        };
        if dropping >= INLINE_DROPS {
            let boxed = NonNull::from(Box::leak(Box::new(upstream))).cast::<()>();
            let deferred = Deferred {
                boxed,
                drop_boxed: drop_boxed::<U>,
            };
            match DEFERRED.try_with(|queue| queue.borrow_mut().push(deferred)) {
                Ok(()) => return,
                // SAFETY: `boxed` is the box just made, not queued.
                Err(_) => return unsafe { drop_boxed::<U>(boxed) },
            }
        }
        DROPPING.set(dropping + 1);
        let _restore = Restore(&DROPPING, dropping);
        if dropping > 0 {
            return drop(upstream);
        }
        // The outermost drop: the queue holds upstreams its own drop let
        // go of, so what they borrow is still alive until it returns.
        let _forget = ForgetQueued;
        drop(upstream);
        while let Some(next) = DEFERRED.with(|queue| queue.borrow_mut().pop()) {
            // SAFETY: each queued box is popped, and so dropped, once.
            unsafe { (next.drop_boxed)(next.boxed) };
        }
    }
}

/// Ends the outermost drop: what a panicking drop left queued is leaked,
/// never let go of by a later drop, when what it borrows may be gone.
struct ForgetQueued;

impl Drop for ForgetQueued {
    fn drop(&mut self) {
        // `Deferred` has no drop: taking the queue frees only its buffer.
        let _ = DEFERRED.try_with(RefCell::take);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::{LimitingAdaptor, MallocMemoryResource};

    fn chain(depth: usize) -> (Arc<dyn MemoryResource>, std::sync::Weak<dyn MemoryResource>) {
        let base: Arc<dyn MemoryResource> = Arc::new(MallocMemoryResource::new());
        let weak = Arc::downgrade(&base);
        let mut top = base;
        for _ in 0..depth {
            top = Arc::new(LimitingAdaptor::new(top, usize::MAX));
        }
        (top, weak)
    }

    /// The limit, met from a count already near it (a real chain 512 deep
    /// is slow under miri): one link short passes, the next is refused,
    /// and the thread's count is restored either way.
    #[test]
    fn the_link_past_the_limit_is_refused_and_the_count_restored() {
        let (top, _) = chain(2);
        let stream = Stream::cpu();
        for (start, refused) in [(MAX_NESTED_LINKS - 2, false), (MAX_NESTED_LINKS - 1, true)] {
            NESTED.set(start);
            let result = top.allocate(64, &stream);
            assert_eq!(NESTED.get(), start, "restored after the call");
            NESTED.set(0);
            match result {
                Ok(ptr) => {
                    assert!(!refused, "{start} nested: must be refused");
                    // SAFETY: allocated just above from `top`, freed once.
                    unsafe { top.deallocate(ptr, 64, &stream) }.unwrap();
                }
                Err(error) => {
                    assert!(refused, "{start} nested: {error}");
                    assert!(matches!(
                        error,
                        Error::ChainTooDeep {
                            operation: "allocate",
                            ..
                        }
                    ));
                }
            }
        }
    }

    /// A chain whose types bound its depth is not counted: at the limit,
    /// a `Statistics(Limiting(Malloc))` built from concrete types still
    /// serves, and leaves the count as it was, while the same chain over a
    /// type-erased base is refused.
    #[test]
    fn a_chain_of_concrete_types_is_not_counted() {
        let stream = Stream::cpu();
        let concrete = crate::StatisticsAdaptor::new(LimitingAdaptor::new(
            MallocMemoryResource::new(),
            usize::MAX,
        ));
        let erased: Arc<dyn MemoryResource> = Arc::new(MallocMemoryResource::new());
        let erased = crate::StatisticsAdaptor::new(LimitingAdaptor::new(erased, usize::MAX));
        NESTED.set(MAX_NESTED_LINKS);
        let served = concrete.allocate(64, &stream);
        let count_after = NESTED.get();
        let refused = erased.allocate(64, &stream);
        NESTED.set(0);
        assert_eq!(count_after, MAX_NESTED_LINKS, "not counted, not reset");
        let ptr = served.expect("a chain of concrete types is served at the limit");
        // SAFETY: allocated just above from `concrete`, freed once.
        unsafe { concrete.deallocate(ptr, 64, &stream) }.unwrap();
        assert!(
            matches!(refused, Err(Error::ChainTooDeep { .. })),
            "{refused:?}"
        );
        assert_eq!(
            crate::StatisticsAdaptor::<LimitingAdaptor<MallocMemoryResource>>::nesting_bound(),
            Some(2)
        );
    }

    /// Past `INLINE_DROPS` nested drops the rest of the chain is queued for
    /// the outermost drop: every link is let go, and the queue is empty
    /// after.
    #[test]
    fn a_chain_deeper_than_the_inline_drops_is_let_go_whole() {
        let (top, base) = chain(3 * INLINE_DROPS);
        drop(top);
        assert!(base.upgrade().is_none(), "every link was let go");
        assert_eq!(DROPPING.get(), 0);
        assert!(DEFERRED.with(|queue| queue.borrow().is_empty()));
    }
}
