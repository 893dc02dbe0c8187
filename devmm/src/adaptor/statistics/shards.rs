//! The counters behind [`StatisticsAdaptor`](super::StatisticsAdaptor): one
//! shard per thread slot, so threads counting at once write cache lines of
//! their own instead of passing one line between cores (docs/adr/0020).
//!
//! Every count is exact, the peak included. A shard holds the bytes live
//! through it under a *ceiling*; the ceilings together never pass the peak,
//! so while every shard stays under its own, the bytes live in the whole
//! adaptor cannot pass the peak either, and no shard needs to look at
//! another. An allocation that would take its shard over the ceiling (or its
//! total over its share of `usize::MAX`), and a free its shard cannot cover,
//! take the slow path: every shard locked at once, the exact sums, a new
//! peak when they make one, and new ceilings. Readers lock every shard the
//! same way, so a snapshot is exact even while allocations are in flight.

use std::cell::Cell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::Statistics;

/// Shards per adaptor: threads beyond this share a shard (still exact,
/// through its lock). Sixteen lines are 1 KiB per adaptor.
const SHARDS: usize = 16;

/// Hands each thread the next slot, round robin, on its first count.
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's shard index, `SHARDS` (out of range) until its first
    /// count, so one compare both finds an unassigned slot and proves the
    /// index in bounds. No destructor and a const initialiser: reading it
    /// never allocates, which a global allocator counting through the
    /// adaptor relies on.
    static SLOT: Cell<usize> = const { Cell::new(SHARDS) };
}

/// This thread's slot as it stands: `SHARDS` before its first count.
#[inline]
fn current_slot() -> usize {
    // A thread past its thread-locals' teardown still counts, in shard 0.
    SLOT.try_with(Cell::get).unwrap_or(0)
}

/// This thread's slot, taken now if it had none.
fn my_slot() -> usize {
    match current_slot() {
        slot if slot < SHARDS => slot,
        _ => first_slot() % SHARDS,
    }
}

/// Takes the next slot, round robin, for this thread's first count.
#[cold]
#[inline(never)]
fn first_slot() -> usize {
    let mine = NEXT_SLOT.fetch_add(1, Ordering::Relaxed) % SHARDS;
    let _ = SLOT.try_with(|slot| slot.set(mine));
    mine
}

/// What would overflow: the name `Error::CounterOverflow` reports.
pub(super) type Overflow = &'static str;

/// One thread slot's counts, on a cache line of its own.
///
/// Fields are atomics only so that the lock can guard them without
/// `unsafe`: under the lock every access is a relaxed load or store (plain
/// moves), ordered by the lock's acquire and release.
#[derive(Debug)]
#[repr(align(64))]
struct Shard {
    locked: AtomicBool,
    /// Bytes allocated through this shard and not yet freed through it
    /// (a free on another thread's shard moves bytes here first).
    live: AtomicUsize,
    /// How much `live` may still grow without the peak moving: the shard's
    /// ceiling is `live + room`. Kept as the room rather than the ceiling
    /// so the fast path compares `nbytes` with it and never adds first
    /// (no overflow test).
    room: AtomicUsize,
    total: AtomicUsize,
    /// How much `total` may still grow; the caps (`total + total_room`)
    /// together stay within `usize::MAX`.
    total_room: AtomicUsize,
    allocations: AtomicUsize,
    deallocations: AtomicUsize,
}

impl Shard {
    const fn new() -> Shard {
        Shard {
            locked: AtomicBool::new(false),
            live: AtomicUsize::new(0),
            room: AtomicUsize::new(0),
            total: AtomicUsize::new(0),
            total_room: AtomicUsize::new(0),
            allocations: AtomicUsize::new(0),
            deallocations: AtomicUsize::new(0),
        }
    }

    /// The lock if it is free now, without waiting: the fast paths'.
    #[inline]
    fn try_lock(&self) -> Option<Locked<'_>> {
        self.locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
            // Lazily: a `Locked` made on failure would unlock, on drop, a
            // lock another thread holds.
            .then(|| Locked(self))
    }

    fn lock(&self) -> Locked<'_> {
        self.try_lock().unwrap_or_else(|| {
            self.lock_contended();
            Locked(self)
        })
    }

    /// Counts an allocation of `nbytes` if the shard has room for it;
    /// `false` changes nothing. The shard must be locked.
    #[inline(always)]
    fn count_allocation(&self, nbytes: usize) -> bool {
        let (room, total_room) = (get(&self.room), get(&self.total_room));
        if nbytes <= room && nbytes <= total_room {
            // No overflow: `live + room` and `total + total_room` are
            // within `usize::MAX`.
            set(&self.live, get(&self.live) + nbytes);
            set(&self.room, room - nbytes);
            set(&self.total, get(&self.total) + nbytes);
            set(&self.total_room, total_room - nbytes);
            set(&self.allocations, get(&self.allocations).wrapping_add(1));
            true
        } else {
            false
        }
    }

    /// Counts a free of `nbytes` if the shard holds that many live bytes;
    /// `false` changes nothing. The shard must be locked.
    #[inline(always)]
    fn count_deallocation(&self, nbytes: usize) -> bool {
        let live = get(&self.live);
        if live >= nbytes {
            // The ceiling stays: what is freed becomes room.
            set(&self.live, live - nbytes);
            set(&self.room, get(&self.room) + nbytes);
            set(
                &self.deallocations,
                get(&self.deallocations).wrapping_add(1),
            );
            true
        } else {
            false
        }
    }

    /// Another thread on this slot, or the slow path, holds the lock for a
    /// few dozen instructions; spin briefly, then let it run (on a machine
    /// with fewer cores than threads it may be the one waiting for a core).
    #[cold]
    fn lock_contended(&self) {
        loop {
            for _ in 0..64 {
                if !self.locked.load(Ordering::Relaxed)
                    && self
                        .locked
                        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                        .is_ok()
                {
                    return;
                }
                std::hint::spin_loop();
            }
            std::thread::yield_now();
        }
    }
}

/// A locked shard; unlocks on drop (on unwind too, though nothing that runs
/// under the lock can panic).
struct Locked<'a>(&'a Shard);

impl Drop for Locked<'_> {
    #[inline]
    fn drop(&mut self) {
        self.0.locked.store(false, Ordering::Release);
    }
}

/// Relaxed access to a field of a locked shard.
#[inline]
fn get(field: &AtomicUsize) -> usize {
    field.load(Ordering::Relaxed)
}

#[inline]
fn set(field: &AtomicUsize, value: usize) {
    field.store(value, Ordering::Relaxed);
}

/// What only the slow path and readers touch, behind an ordinary mutex
/// taken before any shard lock (so only one thread ever holds several).
#[derive(Debug)]
struct Global {
    peak: usize,
    /// Each shard's `allocations` at the last rebalance: shards that
    /// allocated since are the ones given room.
    seen: [usize; SHARDS],
    /// Slow paths taken, for the tests that show they stay rare.
    #[cfg(test)]
    slow_paths: usize,
}

/// Exact counts of bytes and calls, sharded by thread slot.
#[derive(Debug)]
pub(super) struct ShardedCounts {
    shards: [Shard; SHARDS],
    global: Mutex<Global>,
}

impl ShardedCounts {
    pub(super) const fn new() -> ShardedCounts {
        ShardedCounts {
            shards: [const { Shard::new() }; SHARDS],
            global: Mutex::new(Global {
                peak: 0,
                seen: [0; SHARDS],
                #[cfg(test)]
                slow_paths: 0,
            }),
        }
    }

    /// The thread's own shard, locked, if it has one and the lock is free
    /// now.
    #[inline(always)]
    fn try_lock_mine(&self) -> Option<Locked<'_>> {
        self.shards.get(current_slot()).and_then(Shard::try_lock)
    }

    /// The fast path of counting an allocation of `nbytes`: `true` when
    /// counted, in the thread's own shard. `false` changes nothing; then
    /// [`allocate_slow`](Self::allocate_slow) counts it. No call on this
    /// path, so its caller keeps few registers (docs/benchmarks.md).
    #[inline]
    pub(super) fn try_allocate(&self, nbytes: usize) -> bool {
        self.try_lock_mine()
            .is_some_and(|locked| locked.0.count_allocation(nbytes))
    }

    /// Counts an allocation [`try_allocate`](Self::try_allocate) did not
    /// (the thread's first count, a contended lock, or no room left), or
    /// changes nothing and names the counter it would overflow.
    #[cold]
    #[inline(never)]
    pub(super) fn allocate_slow(&self, nbytes: usize) -> Result<(), Overflow> {
        let me = my_slot();
        if self.shards[me].lock().0.count_allocation(nbytes) {
            return Ok(());
        }
        self.allocate_rebalancing(me, nbytes)
    }

    /// Counts a free of `nbytes`: on the thread's own shard when its lock
    /// is free and it holds that many live bytes (no call), else on the
    /// slow path.
    #[inline(always)]
    pub(super) fn deallocate(&self, nbytes: usize) {
        let counted = self
            .try_lock_mine()
            .is_some_and(|locked| locked.0.count_deallocation(nbytes));
        if !counted {
            self.deallocate_slow(nbytes);
        }
    }

    /// Counts a free [`deallocate`](Self::deallocate)'s fast path did not.
    #[cold]
    #[inline(never)]
    fn deallocate_slow(&self, nbytes: usize) {
        let me = my_slot();
        if !self.shards[me].lock().0.count_deallocation(nbytes) {
            self.deallocate_gathering(me, nbytes);
        }
    }

    /// The global state and every shard, locked, in that order.
    fn lock_all(&self) -> (std::sync::MutexGuard<'_, Global>, [Locked<'_>; SHARDS]) {
        let global = self.global.lock().unwrap_or_else(|e| e.into_inner());
        (global, std::array::from_fn(|i| self.shards[i].lock()))
    }

    /// [`lock_all`](Self::lock_all) for a slow path (counted in tests).
    fn lock_for_slow_path(&self) -> (std::sync::MutexGuard<'_, Global>, [Locked<'_>; SHARDS]) {
        // `mut` is for the test build's count.
        #[allow(unused_mut)]
        let (mut global, locked) = self.lock_all();
        #[cfg(test)]
        {
            global.slow_paths += 1;
        }
        (global, locked)
    }

    fn sum(&self, field: impl Fn(&Shard) -> &AtomicUsize) -> usize {
        // The invariants keep live and total sums within usize; the counts
        // of calls wrap only after 2^64 of them.
        self.shards
            .iter()
            .fold(0usize, |sum, s| sum.wrapping_add(get(field(s))))
    }

    /// An allocation with no room in its shard: counted with every shard
    /// locked, the peak raised when it rises, the room shared out again.
    #[cold]
    fn allocate_rebalancing(&self, me: usize, nbytes: usize) -> Result<(), Overflow> {
        let (mut global, _locked) = self.lock_for_slow_path();
        let current = self
            .sum(|s| &s.live)
            .checked_add(nbytes)
            .ok_or("current_bytes")?;
        let total = self
            .sum(|s| &s.total)
            .checked_add(nbytes)
            .ok_or("total_bytes")?;
        let shard = &self.shards[me];
        set(&shard.live, get(&shard.live) + nbytes);
        set(&shard.total, get(&shard.total) + nbytes);
        set(&shard.allocations, get(&shard.allocations).wrapping_add(1));
        global.peak = global.peak.max(current);
        self.rebalance(&mut global, me, current, total);
        Ok(())
    }

    /// Shares the room under the peak (and under `usize::MAX` for totals)
    /// among `me` and the shards that allocated since the last rebalance;
    /// the others keep only what they hold. `current` and `total` are the
    /// sums now.
    fn rebalance(&self, global: &mut Global, me: usize, current: usize, total: usize) {
        let is_active =
            |i: usize, g: &Global| i == me || get(&self.shards[i].allocations) != g.seen[i];
        let sharing = (0..SHARDS).filter(|&i| is_active(i, global)).count();
        let (room, total_room) = (global.peak - current, usize::MAX - total);
        let mut given = (0, 0);
        for (i, shard) in self.shards.iter().enumerate() {
            let share = if i == me {
                continue;
            } else if is_active(i, global) {
                (room / sharing, total_room / sharing)
            } else {
                (0, 0)
            };
            set(&shard.room, share.0);
            set(&shard.total_room, share.1);
            given = (given.0 + share.0, given.1 + share.1);
        }
        let shard = &self.shards[me];
        set(&shard.room, room - given.0);
        set(&shard.total_room, total_room - given.1);
        for (seen, shard) in global.seen.iter_mut().zip(&self.shards) {
            *seen = get(&shard.allocations);
        }
    }

    /// A free its shard cannot cover: every other shard's live bytes
    /// gathered into it first.
    #[cold]
    fn deallocate_gathering(&self, me: usize, nbytes: usize) {
        let (_global, _locked) = self.lock_for_slow_path();
        let shard = &self.shards[me];
        set(
            &shard.deallocations,
            get(&shard.deallocations).wrapping_add(1),
        );
        // Bring every other shard's live bytes here, ceilings with them
        // (so every shard's room stays as it was): a thread freeing what
        // others allocated then frees from its own shard until that is
        // spent.
        for other in &self.shards {
            if std::ptr::eq(other, shard) {
                continue;
            }
            set(&shard.live, get(&shard.live) + get(&other.live));
            set(&other.live, 0);
        }
        // More freed than is live (a caller's bug the upstream could not
        // catch): the count stops at zero rather than wrapping. The
        // ceiling stays, so what is freed becomes room.
        let freed = get(&shard.live).min(nbytes);
        set(&shard.live, get(&shard.live) - freed);
        set(&shard.room, get(&shard.room) + freed);
    }

    /// Starts a new peak window at the bytes live now.
    pub(super) fn reset_peak(&self) {
        let (mut global, _locked) = self.lock_all();
        global.peak = self.sum(|s| &s.live);
        for shard in &self.shards {
            set(&shard.room, 0);
        }
    }

    /// The peak alone: one uncontended lock, no shard touched.
    pub(super) fn peak(&self) -> usize {
        self.global.lock().unwrap_or_else(|e| e.into_inner()).peak
    }

    /// Every count at one instant.
    pub(super) fn snapshot(&self) -> Statistics {
        let (global, _locked) = self.lock_all();
        Statistics {
            current_bytes: self.sum(|s| &s.live),
            peak_bytes: global.peak,
            total_bytes: self.sum(|s| &s.total),
            allocations: self.sum(|s| &s.allocations),
            deallocations: self.sum(|s| &s.deallocations),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, mpsc};

    fn slow_paths(counts: &ShardedCounts) -> usize {
        counts.global.lock().unwrap().slow_paths
    }

    /// Both paths, as the adaptor takes them.
    fn allocate(counts: &ShardedCounts, nbytes: usize) -> Result<(), Overflow> {
        if counts.try_allocate(nbytes) {
            return Ok(());
        }
        counts.allocate_slow(nbytes)
    }

    /// A fast path that finds its shard locked must leave the lock to its
    /// holder (a `Locked` made and dropped there would release it).
    #[test]
    fn a_failed_try_lock_leaves_the_holder_locked() {
        let shard = Shard::new();
        let held = shard.lock();
        assert!(shard.try_lock().is_none());
        assert!(
            shard.locked.load(Ordering::Relaxed),
            "the holder lost its lock"
        );
        drop(held);
        // `compare_exchange_weak` may fail spuriously (miri makes it do so
        // often, and so may LL/SC hardware), so a free lock is one that a
        // few tries take, not necessarily the first.
        assert!(
            (0..1_000).any(|_| shard.try_lock().is_some()),
            "the released lock could not be taken again"
        );
    }

    /// Threads that allocate and free their own blocks leave the shared
    /// state alone once their shards have room: the claim behind the
    /// thread-scaling figures, checked without a clock.
    #[test]
    fn threads_freeing_their_own_blocks_rarely_leave_their_shard() {
        // Fewer under miri, which runs each step some thousand times slower.
        const PAIRS: usize = if cfg!(miri) { 500 } else { 20_000 };
        let counts = Arc::new(ShardedCounts::new());
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let counts = Arc::clone(&counts);
                std::thread::spawn(move || {
                    for _ in 0..PAIRS {
                        allocate(&counts, 64).unwrap();
                        counts.deallocate(64);
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        let st = counts.snapshot();
        assert_eq!(
            (st.allocations, st.deallocations, st.current_bytes),
            (2 * PAIRS, 2 * PAIRS, 0)
        );
        // Each thread's first count, and each rise of the peak (at most to
        // both blocks at once), and the shares moving while it is lower.
        let slow = slow_paths(&counts);
        assert!(slow <= 16, "{slow} slow paths in {} calls", 4 * PAIRS);
    }

    /// A consumer freeing a producer's blocks takes the slow path about
    /// once per batch of what the producer had live, not once per free.
    /// The producer hands its blocks over in batches of 64, so what it has
    /// live when the consumer runs dry does not depend on how the two
    /// threads interleave. (A consumer in lockstep with the producer, one
    /// block at a time, finds one or two live at each gather and takes the
    /// slow path on up to a third of its frees: docs/adr/0020.)
    #[test]
    fn frees_from_another_thread_are_batched() {
        // Fewer under miri, which runs each step some thousand times slower.
        const ITEMS: usize = if cfg!(miri) { 2_000 } else { 20_000 };
        const BATCH: usize = 64;
        let counts = Arc::new(ShardedCounts::new());
        let (tx, rx) = mpsc::sync_channel::<usize>(1);
        let producer = {
            let counts = Arc::clone(&counts);
            std::thread::spawn(move || {
                for batch in (0..ITEMS).step_by(BATCH) {
                    let blocks = BATCH.min(ITEMS - batch);
                    for _ in 0..blocks {
                        allocate(&counts, 32).unwrap();
                    }
                    tx.send(blocks).unwrap();
                }
            })
        };
        for blocks in rx {
            for _ in 0..blocks {
                counts.deallocate(32);
            }
        }
        producer.join().unwrap();
        let st = counts.snapshot();
        assert_eq!(
            (st.allocations, st.deallocations, st.current_bytes),
            (ITEMS, ITEMS, 0)
        );
        let slow = slow_paths(&counts);
        assert!(slow < ITEMS / 4, "{slow} slow paths for {ITEMS} frees");
    }
}
