//! Recovering from running out of memory: what a failure knows
//! ([`OutOfMemoryFigures`]) and the process-wide hooks that see every
//! failure before it propagates ([`on_out_of_memory`]).
//!
//! The hooks run at devmm's allocation entry points ([`DeviceBuffer::new`],
//! so [`empty`](crate::empty) and the bindings' buffers, PyTorch's
//! allocator, NumPy's allocator, the `Allocator` bridge, a binding's direct
//! `allocate`), each of which goes through [`observe_allocation`]. The
//! global allocator ([`GlobalResource`](crate::interop::GlobalResource)) does not: a hook there would
//! allocate inside the allocator it serves. A thread counts how many entry
//! points it is inside, and only the outermost runs the hooks: a failure
//! runs them once, however many adaptors it crossed and whether or not a
//! resource of Python code allocated through devmm itself.
//!
//! [`DeviceBuffer::new`]: crate::DeviceBuffer::new

use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::device::Device;
use crate::error::{CallbackError, Error, Result};
use crate::pool_statistics::PoolStatistics;

/// What an out-of-memory failure tells a person who must act on it: the
/// device, the size asked, the resource chain, the pool's figures when the
/// memory came from a pool, and the largest request that would fit now
/// when the resource can tell.
///
/// ```
/// use devmm::{LimitingAdaptor, MallocMemoryResource, MemoryResource, Stream};
/// let mr = LimitingAdaptor::new(MallocMemoryResource::new(), 64);
/// let s = Stream::cpu();
/// let p = mr.allocate(48, &s)?;
/// let err = mr.allocate(32, &s).unwrap_err();
/// let figures = err.out_of_memory_figures().expect("a limit is out of memory");
/// assert_eq!((figures.nbytes, figures.largest_fit), (32, Some(16)));
/// assert!(figures.chain.starts_with("LimitingAdaptor -> MallocMemoryResource"));
/// assert_eq!(figures.pool, None);
/// unsafe { mr.deallocate(p, 48, &s)? };
/// # Ok::<(), devmm::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutOfMemoryFigures {
    /// The device asked.
    pub device: Device,
    /// The size asked.
    pub nbytes: usize,
    /// The resource chain, outermost first.
    pub chain: String,
    /// The figures of the pool the memory was asked from, when the resource
    /// has a pool of its own (`CudaAsyncMemoryResource`,
    /// `HipAsyncMemoryResource`): its reserved bytes less its used bytes
    /// ([`PoolStatistics::fragmentation_bytes`]) is what it holds but could
    /// not give the request. `None` for other resources (the device's
    /// default pool is shared with the whole process: its figures would
    /// not be this resource's).
    pub pool: Option<PoolStatistics>,
    /// The largest request that would succeed now, when the resource can
    /// tell (a [`LimitingAdaptor`](crate::LimitingAdaptor) knows its
    /// remaining budget; a driver only knows free bytes, not the largest
    /// free block, so its failures say `None`).
    pub largest_fit: Option<usize>,
}

impl Error {
    /// The figures of an out-of-memory failure ([`Error::OutOfMemory`],
    /// [`Error::LimitExceeded`]); `None` for other errors, and for a
    /// callback's refusal for want of memory, which says nothing devmm can
    /// read.
    pub fn out_of_memory_figures(&self) -> Option<OutOfMemoryFigures> {
        match self {
            Error::OutOfMemory {
                device,
                nbytes,
                chain,
                pool,
                ..
            } => Some(OutOfMemoryFigures {
                device: *device,
                nbytes: *nbytes,
                chain: chain.clone(),
                pool: *pool,
                largest_fit: None,
            }),
            Error::LimitExceeded {
                device,
                nbytes,
                limit,
                in_use,
                chain,
            } => Some(OutOfMemoryFigures {
                device: *device,
                nbytes: *nbytes,
                chain: chain.clone(),
                pool: None,
                largest_fit: Some(limit.saturating_sub(*in_use)),
            }),
            _ => None,
        }
    }
}

type Hook = dyn Fn(&Error) -> Result<(), CallbackError> + Send + Sync;

/// The registered hooks, in registration order, by id.
static HOOKS: Mutex<Vec<(u64, Arc<Hook>)>> = Mutex::new(Vec::new());

fn hooks() -> MutexGuard<'static, Vec<(u64, Arc<Hook>)>> {
    // Each change is one push or one removal: a poisoned lock is consistent.
    HOOKS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Registers `hook`, run with every out-of-memory error
/// ([`Error::is_out_of_memory`]) before it propagates from one of devmm's
/// allocation entry points, once per failure. Hooks run in the order they
/// were registered, on the failing thread, with no lock of devmm's held (a
/// hook may register or remove hooks, and free memory). A hook that fails
/// does not hide the error: its failure is logged (target
/// `devmm::out_of_memory`, level warn) and the next hook runs.
///
/// The hook stays registered until [`OutOfMemoryHook::remove`]; dropping
/// the handle keeps it, as PyTorch's out-of-memory observers stay.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use devmm::{DeviceBuffer, LimitingAdaptor, MallocMemoryResource, Stream, on_out_of_memory};
/// let seen = Arc::new(AtomicUsize::new(0));
/// let counter = Arc::clone(&seen);
/// let hook = on_out_of_memory(move |err| {
///     if let Some(figures) = err.out_of_memory_figures() {
///         counter.fetch_add(figures.nbytes, Ordering::Relaxed);
///     }
///     Ok(())
/// });
/// let mr = Arc::new(LimitingAdaptor::new(MallocMemoryResource::new(), 64));
/// assert!(DeviceBuffer::new(100, mr, &Stream::cpu()).unwrap_err().is_out_of_memory());
/// assert!(hook.remove());
/// // Other threads' failures may have run it too (it is process-wide).
/// assert!(seen.load(Ordering::Relaxed) >= 100);
/// ```
pub fn on_out_of_memory(
    hook: impl Fn(&Error) -> Result<(), CallbackError> + Send + Sync + 'static,
) -> OutOfMemoryHook {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    hooks().push((id, Arc::new(hook)));
    OutOfMemoryHook { id }
}

/// The handle of a hook [`on_out_of_memory`] registered.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct OutOfMemoryHook {
    id: u64,
}

impl OutOfMemoryHook {
    /// Unregisters the hook; `false` when it was already removed. A failure
    /// running the hook on another thread at this moment finishes with it.
    pub fn remove(&self) -> bool {
        let removed = {
            let mut hooks = hooks();
            hooks
                .iter()
                .position(|(id, _)| *id == self.id)
                .map(|at| hooks.remove(at))
        };
        // Dropped outside the lock: a hook's captures may run code (a
        // binding's object) that registers or removes hooks.
        removed.is_some()
    }
}

impl fmt::Debug for OutOfMemoryHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OutOfMemoryHook({})", self.id)
    }
}

thread_local! {
    /// How many allocation entry points this thread is inside.
    static DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// Leaves an entry point, even when the allocation unwinds.
struct Entered;

impl Entered {
    /// Enters one; whether it is the outermost on this thread.
    fn enter() -> (Entered, bool) {
        let outermost = DEPTH.with(|depth| {
            let d = depth.get();
            depth.set(d.saturating_add(1));
            d == 0
        });
        (Entered, outermost)
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        DEPTH.with(|depth| depth.set(depth.get().saturating_sub(1)));
    }
}

/// Runs `allocate`, an allocation at one of devmm's entry points, and runs
/// the [`on_out_of_memory`] hooks with its out-of-memory error before
/// returning it. Only the outermost entry point on a thread runs them, so
/// an allocation that nests another (a resource of a binding's code that
/// allocates a [`DeviceBuffer`](crate::DeviceBuffer), a hook or
/// [`FailureCallbackAdaptor`](crate::FailureCallbackAdaptor) callback that
/// allocates) runs them once, for the failure the caller sees. Bindings and
/// bridges that call [`MemoryResource::allocate`](crate::MemoryResource::allocate)
/// on behalf of a user go through this.
///
/// ```
/// use devmm::{LimitingAdaptor, MallocMemoryResource, MemoryResource, Stream, observe_allocation};
/// let mr = LimitingAdaptor::new(MallocMemoryResource::new(), 8);
/// let err = observe_allocation(|| mr.allocate(9, &Stream::cpu())).unwrap_err();
/// assert!(err.is_out_of_memory());
/// ```
pub fn observe_allocation<T>(allocate: impl FnOnce() -> Result<T>) -> Result<T> {
    let (entered, outermost) = Entered::enter();
    let result = allocate();
    match result {
        Err(error) if outermost && error.is_out_of_memory() => {
            // Still inside: an allocation a hook makes does not run them again.
            run_hooks(&error);
            drop(entered);
            Err(error)
        }
        result => result,
    }
}

/// Runs every registered hook with `error`, logging the failures.
#[cold]
#[inline(never)]
fn run_hooks(error: &Error) {
    let hooks: Vec<Arc<Hook>> = hooks().iter().map(|(_, hook)| Arc::clone(hook)).collect();
    for hook in hooks {
        if let Err(failure) = hook(error) {
            tracing::warn!(
                target: "devmm::out_of_memory",
                %failure,
                %error,
                "an out-of-memory hook failed; the out-of-memory error propagates unchanged"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_entry_points_run_the_hooks_once_at_the_outermost() {
        let inner_outermost = std::cell::Cell::new(None);
        let (outer, outermost) = Entered::enter();
        assert!(outermost);
        let (inner, nested_outermost) = Entered::enter();
        inner_outermost.set(Some(nested_outermost));
        drop(inner);
        drop(outer);
        assert_eq!(inner_outermost.get(), Some(false));
        let (again, outermost) = Entered::enter();
        assert!(outermost, "leaving restores the depth");
        drop(again);
    }
}
