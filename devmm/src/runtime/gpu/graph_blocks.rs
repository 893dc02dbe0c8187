//! The blocks a stream-ordered resource allocated on a capturing stream:
//! each is an allocation node of the capture's graph, and only a free
//! within that same capture becomes its free node here (the driver refuses
//! a free node for "an address that was not returned by an allocation
//! node" and invalidates the capture; a free node for another graph's
//! block would free it at every launch of this one). Kept by address with
//! the capture's id, so a graph's temporaries can be freed inside it, as
//! CUDA graphs expect, while other memory is still refused.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// A resource's graph allocations that are not freed yet.
#[derive(Debug, Default)]
pub(super) struct GraphBlocks {
    /// How many blocks `by_address` holds, read without the lock: a free
    /// on a resource that never allocated during a capture pays one load.
    count: AtomicUsize,
    /// Read on every free while blocks are kept (one whose graph never ran
    /// may stay for good), written only for graph blocks.
    by_address: RwLock<HashMap<usize, u64>>,
}

impl GraphBlocks {
    // The map holds plain integers: a panic elsewhere leaves it whole.
    fn read(&self) -> RwLockReadGuard<'_, HashMap<usize, u64>> {
        self.by_address.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, HashMap<usize, u64>> {
        self.by_address.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the block at `addr` as an allocation node of `capture`.
    pub(super) fn insert(&self, addr: usize, capture: u64) {
        let mut blocks = self.write();
        blocks.insert(addr, capture);
        self.count.store(blocks.len(), Ordering::Relaxed);
    }

    /// The capture whose graph allocated the block at `addr`, if one did.
    pub(super) fn capture_of(&self, addr: usize) -> Option<u64> {
        if self.count.load(Ordering::Relaxed) == 0 {
            return None;
        }
        self.read().get(&addr).copied()
    }

    /// Forgets the block at `addr` as it is freed (by its graph or after
    /// it), before the free: once freed, the address may be handed out
    /// again, and recorded again, at once. Returns its capture, to
    /// [`insert`](Self::insert) back should the free fail.
    pub(super) fn remove(&self, addr: usize) -> Option<u64> {
        self.capture_of(addr)?;
        let mut blocks = self.write();
        let capture = blocks.remove(&addr);
        self.count.store(blocks.len(), Ordering::Relaxed);
        capture
    }
}

#[cfg(test)]
mod tests {
    use super::GraphBlocks;

    #[test]
    fn a_block_is_known_with_its_capture_until_it_is_freed() {
        let blocks = GraphBlocks::default();
        assert_eq!(blocks.capture_of(0x1000), None);
        blocks.insert(0x1000, 7);
        blocks.insert(0x2000, 8);
        assert_eq!(blocks.capture_of(0x1000), Some(7));
        assert_eq!(blocks.capture_of(0x2000), Some(8));
        assert_eq!(blocks.capture_of(0x3000), None);
        assert_eq!(blocks.remove(0x1000), Some(7));
        assert_eq!(blocks.capture_of(0x1000), None);
        assert_eq!(blocks.remove(0x1000), None);
        assert_eq!(blocks.remove(0x2000), Some(8));
        assert_eq!(blocks.capture_of(0x2000), None);
    }
}
