//! Allocation bookkeeping: which pointers a resource has handed out, with
//! what sizes, so misuse of `deallocate` is an error instead of corruption.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Mutex, MutexGuard};

use crate::error::MisuseKind;
use crate::ptr::DevicePtr;

/// How many of its latest frees a ledger remembers to tell a double free
/// from an unknown pointer. Bounded so a long run does not grow it.
const FREED_MEMORY: usize = 1024;

#[derive(Default)]
struct LedgerState {
    live: HashMap<usize, usize>,
    /// Freed addresses not handed out again since, each with the number of
    /// the free that released it.
    freed: HashMap<usize, u64>,
    /// The latest frees, oldest first. An entry whose address was handed
    /// out again (or freed again later) is stale and only ages out: every
    /// operation stays O(1), where pruning the queue on `record` scanned all
    /// of it (34x the cost of a raw 64-byte allocation pair for the heap
    /// resource; docs/benchmarks.md).
    free_order: VecDeque<(usize, u64)>,
    frees: u64,
}

impl LedgerState {
    fn remember_free(&mut self, addr: usize) {
        self.frees += 1;
        self.freed.insert(addr, self.frees);
        self.free_order.push_back((addr, self.frees));
        if self.free_order.len() > FREED_MEMORY
            && let Some((old, number)) = self.free_order.pop_front()
            && self.freed.get(&old) == Some(&number)
        {
            self.freed.remove(&old);
        }
    }
}

/// The live allocations of one resource: the bookkeeping
/// `#[memory_resource]` keeps in debug builds, usable by hand-written
/// resources too.
///
/// Thread-safe; every update is a single insert or remove under a lock.
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
        // Every update is a single insert or remove, so the state stays
        // consistent across a panic elsewhere.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records that `ptr` was handed out with `nbytes`.
    pub fn record(&self, ptr: DevicePtr, nbytes: usize) {
        let mut state = self.state();
        state.live.insert(ptr.addr(), nbytes);
        state.freed.remove(&ptr.addr());
    }

    /// Removes `ptr` if it is live with exactly `nbytes`; otherwise says how
    /// the call misuses the resource and leaves the ledger unchanged.
    pub fn take(&self, ptr: DevicePtr, nbytes: usize) -> Result<(), MisuseKind> {
        let mut state = self.state();
        match state.live.get(&ptr.addr()) {
            None if state.freed.contains_key(&ptr.addr()) => Err(MisuseKind::DoubleFree),
            None => Err(MisuseKind::UnknownPointer),
            Some(&allocated) if allocated != nbytes => Err(MisuseKind::WrongSize { allocated }),
            Some(_) => {
                state.live.remove(&ptr.addr());
                state.remember_free(ptr.addr());
                Ok(())
            }
        }
    }

    /// The number of live allocations.
    pub fn live_count(&self) -> usize {
        self.state().live.len()
    }

    /// Empties the ledger, returning the live allocations as
    /// `(pointer, nbytes)` pairs (for a resource releasing them on drop).
    pub fn drain(&mut self) -> Vec<(DevicePtr, usize)> {
        let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        state.freed.clear();
        state.free_order.clear();
        state
            .live
            .drain()
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let state = ledger.state();
        assert_eq!(
            (state.freed.len(), state.free_order.len()),
            (FREED_MEMORY, FREED_MEMORY)
        );
    }

    #[test]
    fn drain_returns_the_live_allocations() {
        let mut ledger = Ledger::new();
        ledger.record(DevicePtr::from_addr(8), 3);
        assert_eq!(ledger.drain(), vec![(DevicePtr::from_addr(8), 3)]);
        assert_eq!(ledger.live_count(), 0);
    }
}
