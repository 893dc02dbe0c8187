//! Allocation bookkeeping: which pointers a resource has handed out, with
//! what sizes, so misuse of `deallocate` is an error instead of corruption;
//! the one rule for freeing null; and [`Checked`], which puts any resource
//! behind a ledger.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{Error, MisuseKind, Result};
use crate::ptr::DevicePtr;
use crate::resource::MemoryResource;
use crate::stream::Stream;

/// The rule every resource and adaptor applies to a null pointer: only a
/// zero-byte allocation may be null, so `deallocate(NULL, 0)` frees nothing
/// and succeeds (`Ok(true)`), and `deallocate(NULL, n > 0)` is a pointer the
/// resource never handed out. `Ok(false)`: not null, nothing decided.
pub(crate) fn check_null(ptr: DevicePtr, nbytes: usize) -> Result<bool, MisuseKind> {
    match (ptr.is_null(), nbytes) {
        (false, _) => Ok(false),
        (true, 0) => Ok(true),
        (true, _) => Err(MisuseKind::UnknownPointer),
    }
}

/// The rule every resource applies to a null pointer (only a zero-byte
/// allocation may be null), for a `deallocate(ptr, nbytes)` through `mr`,
/// the misuse an error naming `mr`: `Ok(true)` when there is nothing to free
/// (null, 0 bytes), `Ok(false)` when `mr` must free `ptr`. For resources
/// written outside the crate that check their calls as devmm's do (the
/// Python package's rmm and CuPy resources).
///
/// ```
/// use devmm::{frees_nothing, DevicePtr, MallocMemoryResource};
/// let mr = MallocMemoryResource::new();
/// assert!(frees_nothing(&mr, DevicePtr::NULL, 0)?);
/// assert!(!frees_nothing(&mr, DevicePtr::from_addr(64), 8)?);
/// let err = frees_nothing(&mr, DevicePtr::NULL, 8).unwrap_err();
/// assert!(err.to_string().contains("foreign-free"), "{err}");
/// # Ok::<(), devmm::Error>(())
/// ```
pub fn frees_nothing(mr: &dyn MemoryResource, ptr: DevicePtr, nbytes: usize) -> Result<bool> {
    check_null(ptr, nbytes).map_err(|kind| misuse_of(mr, kind, ptr, nbytes))
}

/// How many of its latest frees a ledger remembers to tell a double free
/// from an unknown pointer. Bounded so a long run does not grow it.
const FREED_MEMORY: usize = 1024;

/// The live map, keyed by address, hashed by [`AddressHasher`].
pub(crate) type AddressMap<V> = HashMap<usize, V, BuildHasherDefault<AddressHasher>>;

/// Hashes addresses so that nearby ones land in nearby buckets.
///
/// A program's next allocation is usually close to its last ones, so with
/// a hash that scatters (SipHash, foldhash) every insert and remove of a
/// ledger holding 100,000 live allocations touched a cold line of a 2 MB
/// table: the same instructions took 2.5 times as long as with none live
/// (docs/benchmarks.md). Here the bucket index (the low bits the table
/// masks) is the address in 16-byte units XOR-ed with a mixed value of its
/// 64 KiB region: inside a region neighbours stay neighbours, and regions
/// (large allocations, device memory aligned to big powers of two) are
/// spread over the table. The tag the table compares first (the top seven
/// bits) is mixed from the whole address, so neighbours sharing a group of
/// buckets do not share a tag. SipHash's DoS resistance buys nothing for
/// pointers the process itself was handed.
#[derive(Default)]
pub(crate) struct AddressHasher(u64);

impl AddressHasher {
    /// Multiplies and folds the 128-bit product: every input bit reaches
    /// the high and the low half.
    fn mix(x: u64) -> u64 {
        let product = u128::from(x) * 0x9E37_79B9_7F4A_7C15;
        (product as u64) ^ ((product >> 64) as u64)
    }
}

impl Hasher for AddressHasher {
    fn write_usize(&mut self, addr: usize) {
        const TAG_SHIFT: u32 = 57;
        let addr = addr as u64;
        let bucket = (addr >> 4) ^ AddressHasher::mix(addr >> 16);
        let tag = AddressHasher::mix(addr) >> TAG_SHIFT;
        self.0 = (bucket & ((1 << TAG_SHIFT) - 1)) | (tag << TAG_SHIFT);
    }

    /// Only addresses (`usize`) are hashed; anything else is folded in
    /// byte by byte, correctly if slowly.
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = AddressHasher::mix(self.0 ^ u64::from(byte));
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// How many of its latest allocations a ledger holds beside its table.
const NURSERY: usize = 8;

#[derive(Default)]
struct LedgerState {
    /// The latest allocations; they move to `live` only when more than
    /// [`NURSERY`] are recorded before they are taken.
    nursery: Nursery,
    /// Every other live allocation.
    live: AddressMap<usize>,
    recent_frees: RecentFrees,
}

/// The latest few live allocations, in a small array next to the lock, so
/// the common short-lived allocation is recorded and taken without
/// touching the table.
///
/// The table of a ledger holding 100,000 live allocations is 2 MB: every
/// pair that went through it touched a table line the cache no longer
/// held, and the pair took 15% to 37% longer than with none live on a
/// quiet machine (docs/benchmarks.md, issue #16). An allocation freed
/// before [`NURSERY`] others are recorded never reaches the table; one
/// that lives longer may move there once, when a record finds the nursery
/// full (the slots are taken round robin, not strictly oldest first). A take
/// of an address not in the nursery costs its [`NURSERY`] comparisons
/// more. Entries are distinct addresses, and none is also in the table,
/// while the resource never hands out an address that is live (no
/// allocator does): see [`Ledger::record`].
#[derive(Default)]
struct Nursery {
    /// `(address, nbytes)`; the first `len` are live.
    entries: [(usize, usize); NURSERY],
    len: usize,
    /// The slot the next record takes from its entry when all are live;
    /// that entry moves to the table.
    evict: usize,
}

impl Nursery {
    /// Adds a live allocation; returns the entry that leaves for the table
    /// to make room, if the nursery was full.
    fn push(&mut self, addr: usize, nbytes: usize) -> Option<(usize, usize)> {
        if self.len < NURSERY {
            self.entries[self.len] = (addr, nbytes);
            self.len += 1;
            return None;
        }
        let slot = self.evict;
        self.evict = (slot + 1) % NURSERY;
        Some(std::mem::replace(&mut self.entries[slot], (addr, nbytes)))
    }

    /// Where `addr` is, searched from the last slot (until the nursery
    /// first fills, the last slot is the latest allocation, which a
    /// short-lived one usually is).
    fn position(&self, addr: usize) -> Option<usize> {
        self.entries[..self.len]
            .iter()
            .rposition(|&(a, _)| a == addr)
    }

    /// Removes the entry at `index` (the last one takes its slot).
    fn remove(&mut self, index: usize) {
        self.len -= 1;
        self.entries[index] = self.entries[self.len];
    }

    fn drain(&mut self) -> impl Iterator<Item = (usize, usize)> + '_ {
        let len = std::mem::take(&mut self.len);
        self.evict = 0;
        self.entries[..len].iter().copied()
    }
}

/// The addresses of the latest [`FREED_MEMORY`] frees, a ring whose oldest
/// entry is overwritten once it is full. It is read only to name a misuse
/// (a pointer that is not live), so a free costs one store here instead of
/// the upkeep of a second map: the check must cost a Python call next to
/// nothing (docs/benchmarks.md). An address handed out again may still be
/// in it; `take` asks only about addresses that are not live.
#[derive(Default)]
struct RecentFrees {
    addrs: Vec<usize>,
    /// The slot the next free overwrites, once `addrs` is full.
    next: usize,
}

impl RecentFrees {
    fn remember(&mut self, addr: usize) {
        if self.addrs.len() < FREED_MEMORY {
            self.addrs.push(addr);
        } else {
            self.addrs[self.next] = addr;
            self.next = (self.next + 1) % FREED_MEMORY;
        }
    }

    fn contains(&self, addr: usize) -> bool {
        self.addrs.contains(&addr)
    }
}

/// The [`Error::Misuse`] a ledger in front of `mr` reports for the call
/// `deallocate(ptr, nbytes)`, naming `mr`'s chain (a resource with no
/// upstream: its own description).
#[cold]
#[inline(never)]
pub(crate) fn misuse_of(
    mr: &dyn crate::resource::MemoryResource,
    kind: MisuseKind,
    ptr: DevicePtr,
    nbytes: usize,
) -> Error {
    Error::Misuse {
        kind,
        ptr,
        nbytes,
        device: mr.device(),
        resource: crate::resource::resource_chain(mr),
        test_double: false,
    }
}

/// The live allocations of one resource: the bookkeeping
/// `#[memory_resource]` keeps in debug builds, usable by hand-written
/// resources too.
///
/// Thread-safe; every update is made under one lock. The latest few
/// allocations are kept beside the table, so a short-lived one costs the
/// same however many others are live.
///
/// ```
/// use devmm::{DevicePtr, Ledger, MisuseKind};
/// let ledger = Ledger::new();
/// let p = DevicePtr::from_addr(0x1000);
/// ledger.record(p, 64);
/// assert_eq!(ledger.live_count(), 1);
/// assert_eq!(ledger.take(p, 32), Err(MisuseKind::WrongSize { allocated: 64 }));
/// assert_eq!(ledger.take(p, 64), Ok(()));
/// assert_eq!(ledger.take(p, 64), Err(MisuseKind::DoubleFree));
/// assert_eq!(ledger.take(DevicePtr::from_addr(0x2000), 8), Err(MisuseKind::UnknownPointer));
/// ```
#[derive(Default)]
pub struct Ledger {
    state: Mutex<LedgerState>,
}

impl Ledger {
    /// An empty ledger.
    pub fn new() -> Ledger {
        Ledger::default()
    }

    fn state(&self) -> MutexGuard<'_, LedgerState> {
        // Every update is an insert or remove (a record that moves a
        // nursery entry to the table reserves the table's room before it
        // takes the entry out), so the state stays consistent across a
        // panic elsewhere.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records that `ptr` was handed out with `nbytes`. Null is never
    /// recorded: it is what a zero-byte allocation may return.
    ///
    /// `ptr` must not be live already (no allocator hands out an address
    /// twice before it is freed); for a broken resource that does, the
    /// ledger may count the two hand-outs as one or as two.
    pub fn record(&self, ptr: DevicePtr, nbytes: usize) {
        self.record_first(ptr, nbytes);
    }

    /// [`record`](Ledger::record), saying whether `ptr` is now the only
    /// live allocation (none was live before it).
    fn record_first(&self, ptr: DevicePtr, nbytes: usize) -> bool {
        if ptr.is_null() {
            return false;
        }
        let mut guard = self.state();
        let state = &mut *guard;
        let first = state.nursery.len + state.live.len() == 0;
        if state.nursery.len == NURSERY {
            // Room first: an entry leaving the nursery must not be lost to
            // a failed table insert.
            state.live.reserve(1);
        }
        if let Some((addr, nbytes)) = state.nursery.push(ptr.addr(), nbytes) {
            state.live.insert(addr, nbytes);
        }
        first
    }

    /// Removes `ptr` if it is live with exactly `nbytes`; otherwise says how
    /// the call misuses the resource and leaves the ledger unchanged.
    /// `take(NULL, 0)` succeeds and changes nothing; `take(NULL, n > 0)` is
    /// an unknown pointer.
    pub fn take(&self, ptr: DevicePtr, nbytes: usize) -> Result<(), MisuseKind> {
        if check_null(ptr, nbytes)? {
            return Ok(());
        }
        let mut guard = self.state();
        // Through a plain reference, so the fields borrow separately.
        let state = &mut *guard;
        if let Some(index) = state.nursery.position(ptr.addr()) {
            let allocated = state.nursery.entries[index].1;
            if allocated != nbytes {
                return Err(MisuseKind::WrongSize { allocated });
            }
            state.nursery.remove(index);
            state.recent_frees.remember(ptr.addr());
            return Ok(());
        }
        match state.live.entry(ptr.addr()) {
            Entry::Occupied(live) if *live.get() == nbytes => {
                live.remove();
                state.recent_frees.remember(ptr.addr());
                Ok(())
            }
            Entry::Occupied(live) => Err(MisuseKind::WrongSize {
                allocated: *live.get(),
            }),
            Entry::Vacant(_) if state.recent_frees.contains(ptr.addr()) => {
                Err(MisuseKind::DoubleFree)
            }
            Entry::Vacant(_) => Err(MisuseKind::UnknownPointer),
        }
    }

    /// The number of live allocations.
    pub fn live_count(&self) -> usize {
        let state = self.state();
        state.nursery.len + state.live.len()
    }

    /// Empties the ledger, returning the live allocations as
    /// `(pointer, nbytes)` pairs (for a resource releasing them on drop).
    pub fn drain(&mut self) -> Vec<(DevicePtr, usize)> {
        let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        state.recent_frees = RecentFrees::default();
        state
            .nursery
            .drain()
            .chain(state.live.drain())
            .map(|(addr, nbytes)| (DevicePtr::from_addr(addr), nbytes))
            .collect()
    }
}

impl fmt::Debug for Ledger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ledger")
            .field("live", &self.live_count())
            .finish()
    }
}

/// Any resource behind a [`Ledger`]: `deallocate` of an unknown pointer, a
/// wrong size or a pointer already freed is an [`Error::Misuse`] that never
/// reaches the wrapped resource, and [`live_count`](MemoryResource::live_count)
/// is exact.
///
/// This is how the Python package hands out every resource it makes, so
/// that no call from Python can free memory twice or free what it never
/// allocated; Rust callers of an unchecked resource keep `deallocate`'s
/// `unsafe` contract instead. It is transparent: its `Debug` and its
/// resource chain are those of the resource it wraps. A `deallocate` the
/// wrapped resource fails leaves the pointer live, so it can be retried.
///
/// ```
/// use devmm::{Checked, Error, MallocMemoryResource, MemoryResource, MisuseKind, Stream};
/// let mr = Checked::new(MallocMemoryResource::new());
/// let s = Stream::cpu();
/// let p = mr.allocate(64, &s)?;
/// assert_eq!(mr.live_count(), Some(1));
/// // SAFETY: the ledger refuses misuse before it reaches `free`.
/// let wrong = unsafe { mr.deallocate(p, 32, &s) };
/// assert!(matches!(wrong, Err(Error::Misuse { kind: MisuseKind::WrongSize { allocated: 64 }, .. })));
/// unsafe { mr.deallocate(p, 64, &s)? };
/// let again = unsafe { mr.deallocate(p, 64, &s) };
/// assert!(matches!(again, Err(Error::Misuse { kind: MisuseKind::DoubleFree, .. })));
/// assert_eq!(format!("{mr:?}"), "MallocMemoryResource(device=cpu:0, alignment=64)");
/// # Ok::<(), devmm::Error>(())
/// ```
pub struct Checked<R> {
    inner: R,
    ledger: Ledger,
    while_live: Option<Arc<dyn WhileLive>>,
}

/// What a [`Checked`] resource's live allocations keep alive (a binding's
/// strong reference to the object that defines the resource): told when
/// an allocation is handed out while none was live, and when the last
/// live one has come back.
///
/// The two calls come outside the ledger's lock, so they may call back
/// into the resource; a `deallocate` and an `allocate` racing on other
/// threads can deliver them out of order, so a hook that must never drop
/// its hold while an allocation is live checks
/// [`live_count`](MemoryResource::live_count) again.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use devmm::{Checked, MallocMemoryResource, MemoryResource, Stream, WhileLive};
/// #[derive(Default)]
/// struct Held(AtomicBool);
/// impl WhileLive for Held {
///     fn first_live(&self) { self.0.store(true, Ordering::Relaxed) }
///     fn none_live(&self) { self.0.store(false, Ordering::Relaxed) }
/// }
/// let held = Arc::new(Held::default());
/// let mr = Checked::new(MallocMemoryResource::new()).while_live(held.clone());
/// let p = mr.allocate(64, &Stream::cpu())?;
/// assert!(held.0.load(Ordering::Relaxed));
/// // SAFETY: `p` came from `mr.allocate(64, ..)` and is freed once.
/// unsafe { mr.deallocate(p, 64, &Stream::cpu())? };
/// assert!(!held.0.load(Ordering::Relaxed));
/// # Ok::<(), devmm::Error>(())
/// ```
pub trait WhileLive: Send + Sync {
    /// An allocation was handed out while none was live.
    fn first_live(&self);
    /// The last live allocation came back.
    fn none_live(&self);
}

impl<R: MemoryResource> Checked<R> {
    /// Puts `inner` behind an empty ledger.
    pub fn new(inner: R) -> Self {
        Checked {
            inner,
            ledger: Ledger::new(),
            while_live: None,
        }
    }

    /// Tells `hook` when the first allocation is live and when none is
    /// any more ([`WhileLive`]).
    pub fn while_live(mut self, hook: Arc<dyn WhileLive>) -> Self {
        self.while_live = Some(hook);
        self
    }

    /// The wrapped resource.
    pub fn get_inner(&self) -> &R {
        &self.inner
    }
}

impl<R: fmt::Debug> fmt::Debug for Checked<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

impl<R: MemoryResource> MemoryResource for Checked<R> {
    fn allocate(&self, nbytes: usize, stream: &Stream) -> Result<DevicePtr> {
        let ptr = self.inner.allocate(nbytes, stream)?;
        let first = self.ledger.record_first(ptr, nbytes);
        if let Some(hook) = self.while_live.as_ref().filter(|_| first) {
            hook.first_live();
        }
        Ok(ptr)
    }

    unsafe fn deallocate(&self, ptr: DevicePtr, nbytes: usize, stream: &Stream) -> Result<()> {
        self.ledger
            .take(ptr, nbytes)
            .map_err(|kind| misuse_of(self, kind, ptr, nbytes))?;
        if ptr.is_null() {
            return Ok(());
        }
        // SAFETY: the pointer was live in the ledger with this size, so it
        // came from `inner.allocate(nbytes, ..)` and was not freed since.
        let freed = unsafe { self.inner.deallocate(ptr, nbytes, stream) };
        if freed.is_err() {
            // Still allocated: the caller may retry.
            self.ledger.record(ptr, nbytes);
        } else if let Some(hook) = &self.while_live
            && self.ledger.live_count() == 0
        {
            // After the inner resource's call, which the hook's hold may
            // be what keeps able to run.
            hook.none_live();
        }
        freed
    }

    crate::resource::forward_transparent_probes!(inner);

    fn detects_misuse(&self) -> bool {
        true
    }

    fn live_count(&self) -> Option<usize> {
        Some(self.ledger.live_count())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use super::*;

    /// Counts the hook's calls.
    #[derive(Default)]
    struct Calls {
        first: AtomicUsize,
        none: AtomicUsize,
    }

    impl WhileLive for Calls {
        fn first_live(&self) {
            self.first.fetch_add(1, Ordering::Relaxed);
        }
        fn none_live(&self) {
            self.none.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The hook hears of the first live allocation and of the last one
    /// back, once each: not of a zero-byte allocation, nor of a free the
    /// inner resource failed (the pointer stays live), nor of misuse.
    #[test]
    fn the_hook_hears_the_first_and_the_last_live_allocation() {
        let next = Arc::new(AtomicUsize::new(0));
        let fail = Arc::new(AtomicBool::new(false));
        let failing = Arc::clone(&fail);
        let inner = crate::CallbackMemoryResource::new(
            crate::Device::CPU,
            1,
            move |n, _| match n {
                0 => Ok(DevicePtr::NULL),
                _ => Ok(DevicePtr::from_addr(
                    64 * (1 + next.fetch_add(1, Ordering::Relaxed)),
                )),
            },
            move |_, _, _| match failing.load(Ordering::Relaxed) {
                true => Err(Error::InvalidArgument {
                    reason: "refused".into(),
                }),
                false => Ok(()),
            },
        )
        .unwrap();
        let calls = Arc::new(Calls::default());
        let mr = Checked::new(inner).while_live(calls.clone());
        let counts = || {
            (
                calls.first.load(Ordering::Relaxed),
                calls.none.load(Ordering::Relaxed),
            )
        };
        let s = Stream::cpu();
        let free = |ptr, nbytes| {
            // SAFETY: pointers `mr` handed out, with their sizes; the
            // ledger refuses the misuse below, and the inner resource frees
            // nothing.
            unsafe { mr.deallocate(ptr, nbytes, &s) }
        };
        let empty = mr.allocate(0, &s).unwrap();
        assert_eq!(counts(), (0, 0), "a zero-byte allocation is not live");
        let a = mr.allocate(8, &s).unwrap();
        let b = mr.allocate(8, &s).unwrap();
        assert_eq!(counts(), (1, 0));
        free(a, 8).unwrap();
        assert_eq!(counts(), (1, 0), "one is still live");
        assert!(free(a, 8).is_err());
        fail.store(true, Ordering::Relaxed);
        assert!(free(b, 8).is_err());
        assert_eq!(counts(), (1, 0), "a failed free leaves it live");
        fail.store(false, Ordering::Relaxed);
        free(b, 8).unwrap();
        free(empty, 0).unwrap();
        assert_eq!(counts(), (1, 1));
        let c = mr.allocate(8, &s).unwrap();
        assert_eq!(counts(), (2, 1), "live again");
        free(c, 8).unwrap();
        assert_eq!(counts(), (2, 2));
    }

    #[test]
    fn freed_memory_is_bounded_and_reuse_clears_it() {
        let ledger = Ledger::new();
        for addr in 1..=(FREED_MEMORY + 1) {
            let p = DevicePtr::from_addr(addr * 64);
            ledger.record(p, 1);
            ledger.take(p, 1).unwrap();
        }
        // The oldest free was forgotten: it reads as unknown, not double.
        assert_eq!(
            ledger.take(DevicePtr::from_addr(64), 1),
            Err(MisuseKind::UnknownPointer)
        );
        let last = DevicePtr::from_addr((FREED_MEMORY + 1) * 64);
        assert_eq!(ledger.take(last, 1), Err(MisuseKind::DoubleFree));
        // An address handed out again is live, not a double free.
        ledger.record(last, 2);
        assert_eq!(ledger.take(last, 2), Ok(()));
    }

    #[test]
    fn a_stale_free_does_not_erase_a_later_free_of_the_same_address() {
        let ledger = Ledger::new();
        let p = DevicePtr::from_addr(0x40);
        // Freed, handed out again, freed again: the first free's queue
        // entry is stale when it ages out and must leave the second alone.
        ledger.record(p, 8);
        ledger.take(p, 8).unwrap();
        ledger.record(p, 8);
        ledger.take(p, 8).unwrap();
        for addr in 1..FREED_MEMORY {
            let q = DevicePtr::from_addr(0x10000 + addr * 64);
            ledger.record(q, 1);
            ledger.take(q, 1).unwrap();
        }
        assert_eq!(ledger.take(p, 8), Err(MisuseKind::DoubleFree));
        let q = DevicePtr::from_addr(0x80);
        ledger.record(q, 1);
        ledger.take(q, 1).unwrap();
        assert_eq!(ledger.take(p, 8), Err(MisuseKind::UnknownPointer));
        // Bounded: the ring holds the latest frees and no more.
        assert_eq!(ledger.state().recent_frees.addrs.len(), FREED_MEMORY);
    }

    fn address_hash(addr: usize) -> u64 {
        let mut hasher = AddressHasher::default();
        hasher.write_usize(addr);
        hasher.finish()
    }

    #[test]
    fn neighbouring_addresses_share_buckets_but_not_tags() {
        let base = 0x7f3a_5c21_0000_usize;
        let hashes: Vec<u64> = (0..16).map(|k| address_hash(base + 64 * k)).collect();
        // 16 blocks of 64 bytes span 64 sixteen-byte units: a table of any
        // size puts them within one 64-bucket run (4 KiB of a 2 MB table).
        let buckets: Vec<u64> = hashes.iter().map(|h| h & 0xFFFF).collect();
        let (lo, hi) = (buckets.iter().min().unwrap(), buckets.iter().max().unwrap());
        assert!(hi - lo < 64, "buckets {buckets:x?} are not neighbours");
        let mut tags: Vec<u64> = hashes.iter().map(|h| h >> 57).collect();
        tags.sort_unstable();
        tags.dedup();
        assert!(tags.len() >= 12, "only {} distinct tags of 16", tags.len());
    }

    #[test]
    fn power_of_two_strides_spread_over_the_table() {
        // Device allocations aligned to 2 MiB: the address bits a small
        // table masks are all equal, so the region's mix must spread them.
        let mut buckets: Vec<u64> = (1..=1024).map(|k| address_hash(k << 21) & 1023).collect();
        buckets.sort_unstable();
        buckets.dedup();
        assert!(
            buckets.len() >= 512,
            "1024 regions fill only {} of 1024 buckets",
            buckets.len()
        );
    }

    #[test]
    fn drain_returns_the_live_allocations() {
        let mut ledger = Ledger::new();
        ledger.record(DevicePtr::from_addr(8), 3);
        assert_eq!(ledger.drain(), vec![(DevicePtr::from_addr(8), 3)]);
        assert_eq!(ledger.live_count(), 0);
        // From the nursery and the table alike.
        let many: Vec<_> = (1..=NURSERY + 3)
            .map(|k| (DevicePtr::from_addr(k * 64), k))
            .collect();
        for &(p, n) in &many {
            ledger.record(p, n);
        }
        let mut drained = ledger.drain();
        drained.sort_unstable_by_key(|&(p, _)| p.addr());
        assert_eq!(drained, many);
        assert_eq!(ledger.live_count(), 0);
        assert_eq!(ledger.take(many[0].0, 1), Err(MisuseKind::UnknownPointer));
    }

    #[test]
    fn allocations_beyond_the_nursery_keep_their_sizes_and_misuse_kinds() {
        let ledger = Ledger::new();
        let count = 3 * NURSERY + 1;
        let ptr = |k: usize| DevicePtr::from_addr(0x10_0000 + k * 64);
        for k in 0..count {
            ledger.record(ptr(k), k + 1);
        }
        assert_eq!(ledger.live_count(), count);
        for k in 0..count {
            assert_eq!(
                ledger.take(ptr(k), k + 2),
                Err(MisuseKind::WrongSize { allocated: k + 1 })
            );
        }
        // Odd ones oldest first, then even ones newest first, with a new
        // allocation recorded between takes so entries keep moving out.
        let order = (0..count)
            .filter(|k| k % 2 == 1)
            .chain((0..count).rev().filter(|k| k % 2 == 0));
        for (taken, k) in order.enumerate() {
            assert_eq!(ledger.take(ptr(k), k + 1), Ok(()), "allocation {k}");
            assert_eq!(ledger.take(ptr(k), k + 1), Err(MisuseKind::DoubleFree));
            let extra = DevicePtr::from_addr(0x20_0000 + taken * 64);
            ledger.record(extra, 7);
            assert_eq!(ledger.live_count(), count);
        }
        for taken in 0..count {
            let extra = DevicePtr::from_addr(0x20_0000 + taken * 64);
            assert_eq!(ledger.take(extra, 7), Ok(()));
        }
        assert_eq!(ledger.live_count(), 0);
        assert_eq!(ledger.take(ptr(count), 1), Err(MisuseKind::UnknownPointer));
    }

    #[test]
    fn a_short_lived_allocation_beside_many_live_ones_never_reaches_the_table() {
        let ledger = Ledger::new();
        for k in 0..1000 {
            ledger.record(DevicePtr::from_addr(0x100_0000 + k * 64), 64);
        }
        // The nursery is full: the first pair moves its oldest entry out.
        let first = DevicePtr::from_addr(0x800_0000);
        ledger.record(first, 64);
        ledger.take(first, 64).unwrap();
        let (in_table, capacity) = {
            let state = ledger.state();
            (state.live.len(), state.live.capacity())
        };
        assert_eq!(in_table, 1000 - NURSERY + 1);
        for k in 1..10_000 {
            // A fresh address each time, as glibc's memalign hands out.
            let p = DevicePtr::from_addr(0x800_0000 + k * 80);
            ledger.record(p, 64);
            assert_eq!(ledger.live_count(), 1001);
            assert!(!ledger.state().live.contains_key(&p.addr()));
            ledger.take(p, 64).unwrap();
        }
        let state = ledger.state();
        assert_eq!(
            (state.live.len(), state.live.capacity()),
            (in_table, capacity)
        );
    }
}
