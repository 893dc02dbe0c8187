//! The sharded statistics adaptor under threads (docs/adr/0020): every
//! count exact, the peak included, snapshots consistent while threads
//! allocate, frees on other threads than the allocation's, more threads
//! than shards.

use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::thread;

use devmm::{
    CallbackMemoryResource, Device, DevicePtr, MallocMemoryResource, MemoryResource,
    StatisticsAdaptor, Stream,
};

type Stats = Arc<StatisticsAdaptor<MallocMemoryResource>>;

fn stats() -> Stats {
    Arc::new(StatisticsAdaptor::new(MallocMemoryResource::new()))
}

fn alloc(stats: &Stats, n: usize) -> DevicePtr {
    stats.allocate(n, &Stream::cpu()).unwrap()
}

fn free(stats: &Stats, p: DevicePtr, n: usize) {
    // SAFETY: every caller frees a pointer of `alloc(stats, n)` once.
    unsafe { stats.deallocate(p, n, &Stream::cpu()).unwrap() };
}

/// Runs `f(thread index)` on `n` threads at once and collects the results.
fn on_threads<T: Send + 'static>(
    n: usize,
    f: impl Fn(usize) -> T + Send + Sync + 'static,
) -> Vec<T> {
    let f = Arc::new(f);
    let handles: Vec<_> = (0..n)
        .map(|t| {
            let f = Arc::clone(&f);
            thread::spawn(move || f(t))
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn hammering_from_many_threads_keeps_every_count_exact() {
    // More threads than the adaptor has shards, so some threads share one.
    const THREADS: usize = 40;
    const ROUNDS: usize = 2_000;
    let s = stats();
    let kept = {
        let s = Arc::clone(&s);
        on_threads(THREADS, move |t| {
            let mut held = Vec::new();
            for i in 0..ROUNDS {
                let n = 1 + (t * ROUNDS + i) % 251;
                let p = alloc(&s, n);
                // Hold every seventh block a while, so shards go up and down.
                if i % 7 == 0 {
                    held.push((p, n));
                } else {
                    free(&s, p, n);
                }
                if held.len() > 5 {
                    let (p, n) = held.remove(0);
                    free(&s, p, n);
                }
            }
            held
        })
    };
    let expected_total: usize = (0..THREADS * ROUNDS).map(|k| 1 + k % 251).sum();
    let kept: Vec<(DevicePtr, usize)> = kept.into_iter().flatten().collect();
    let live: usize = kept.iter().map(|(_, n)| n).sum();
    let st = s.statistics();
    assert_eq!(st.total_bytes, expected_total);
    assert_eq!(st.current_bytes, live);
    assert_eq!(
        (st.allocations, st.deallocations),
        (THREADS * ROUNDS, THREADS * ROUNDS - kept.len())
    );
    // Each thread held at most six blocks of at most 251 bytes and one
    // more in hand.
    assert!(st.peak_bytes >= live && st.peak_bytes <= THREADS * 7 * 251);
    for (p, n) in kept {
        free(&s, p, n);
    }
    assert_eq!(s.current_bytes(), 0);
    assert_eq!(s.statistics().deallocations, THREADS * ROUNDS);
}

#[test]
fn the_peak_is_exact_across_threads() {
    const THREADS: usize = 6;
    let s = stats();
    let gate = Arc::new(Barrier::new(THREADS + 1));
    let workers = {
        let (s, gate) = (Arc::clone(&s), Arc::clone(&gate));
        thread::spawn(move || {
            on_threads(THREADS, move |t| {
                // Phase 1: every thread holds (t + 1) blocks of 1000 bytes.
                let held: Vec<_> = (0..=t).map(|_| alloc(&s, 1000)).collect();
                gate.wait();
                gate.wait();
                for p in held {
                    free(&s, p, 1000);
                }
                gate.wait();
                gate.wait();
                // Phase 2: one thread alone goes higher than every other phase.
                if t == 3 {
                    let big = alloc(&s, 30_000);
                    free(&s, big, 30_000);
                }
                gate.wait();
                // Phase 3: everyone again, lower than phase 2.
                let p = alloc(&s, 100);
                free(&s, p, 100);
            })
        })
    };
    gate.wait();
    let held = 1000 * (1..=THREADS).sum::<usize>();
    assert_eq!(s.statistics().current_bytes, held);
    assert_eq!(s.peak_bytes(), held);
    gate.wait();
    gate.wait();
    assert_eq!((s.current_bytes(), s.peak_bytes()), (0, held));
    gate.wait();
    gate.wait();
    workers.join().unwrap();
    assert_eq!(s.peak_bytes(), 30_000);
    s.reset_peak();
    assert_eq!(s.peak_bytes(), 0);
    // A window after the reset, made by two threads in turn.
    let first = alloc(&s, 700);
    let s2 = Arc::clone(&s);
    thread::spawn(move || {
        let p = alloc(&s2, 300);
        free(&s2, p, 300);
    })
    .join()
    .unwrap();
    free(&s, first, 700);
    assert_eq!(s.peak_bytes(), 1000);
}

#[test]
fn frees_on_other_threads_are_counted_exactly() {
    const ITEMS: usize = 20_000;
    const DEPTH: usize = 8;
    let s = stats();
    let (tx, rx) = mpsc::sync_channel::<(usize, usize)>(DEPTH);
    let producer = {
        let s = Arc::clone(&s);
        thread::spawn(move || {
            for i in 0..ITEMS {
                let n = 16 + i % 113;
                tx.send((alloc(&s, n).addr(), n)).unwrap();
            }
        })
    };
    let consumer = {
        let s = Arc::clone(&s);
        thread::spawn(move || {
            for (addr, n) in rx {
                free(&s, DevicePtr::from_addr(addr), n);
            }
        })
    };
    producer.join().unwrap();
    consumer.join().unwrap();
    let st = s.statistics();
    let total: usize = (0..ITEMS).map(|i| 16 + i % 113).sum();
    assert_eq!(
        (
            st.current_bytes,
            st.total_bytes,
            st.allocations,
            st.deallocations
        ),
        (0, total, ITEMS, ITEMS)
    );
    // In flight at once: the channel's DEPTH, one the producer holds and
    // one the consumer is freeing.
    assert!(
        st.peak_bytes >= 16 && st.peak_bytes <= (DEPTH + 2) * 128,
        "{st:?}"
    );
}

#[test]
fn snapshots_are_consistent_while_threads_allocate() {
    const SIZE: usize = 48;
    let s = stats();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let workers = {
        let (s, stop) = (Arc::clone(&s), Arc::clone(&stop));
        thread::spawn(move || {
            on_threads(3, move |_| {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let a = alloc(&s, SIZE);
                    let b = alloc(&s, SIZE);
                    free(&s, a, SIZE);
                    free(&s, b, SIZE);
                }
            })
        })
    };
    // Read only once the workers are counting.
    while s.statistics().allocations == 0 {
        thread::yield_now();
    }
    for _ in 0..20_000 {
        let st = s.statistics();
        // One instant: live bytes are exactly the unfreed allocations, and
        // no more than the peak.
        assert_eq!(
            st.current_bytes,
            (st.allocations - st.deallocations) * SIZE,
            "{st:?}"
        );
        assert_eq!(st.total_bytes, st.allocations * SIZE, "{st:?}");
        assert!(st.current_bytes <= st.peak_bytes, "{st:?}");
        assert!(st.peak_bytes <= 3 * 2 * SIZE, "{st:?}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    workers.join().unwrap();
    let st = s.statistics();
    assert_eq!((st.current_bytes, st.allocations), (0, st.deallocations));
}

#[test]
fn freeing_more_than_was_allocated_stops_current_at_zero() {
    // A resource of fake addresses that cannot tell a wrong size, so the
    // adaptor sees the caller's bug.
    let fake = CallbackMemoryResource::new(
        Device::CPU,
        1,
        |_, _| Ok(DevicePtr::from_addr(0x1000)),
        |_, _, _| Ok(()),
    )
    .unwrap();
    let s = StatisticsAdaptor::new(fake);
    let stream = Stream::cpu();
    let p = s.allocate(100, &stream).unwrap();
    // SAFETY: fake addresses; nothing is dereferenced.
    unsafe { s.deallocate(p, 150, &stream).unwrap() };
    assert_eq!(s.current_bytes(), 0);
    let q = s.allocate(10, &stream).unwrap();
    assert_eq!((s.current_bytes(), s.peak_bytes()), (10, 100));
    // SAFETY: as above.
    unsafe { s.deallocate(q, 10, &stream).unwrap() };
    assert_eq!(s.statistics().deallocations, 2);
}

#[test]
fn process_wide_statistics_count_every_thread_exactly() {
    use devmm::DeviceBuffer;
    use devmm::statistics::{enable_statistics, get_statistics};
    const THREADS: usize = 8;
    const ROUNDS: usize = 500;
    // Only this test of the binary allocates through the registry, so the
    // process-wide adaptor sees exactly what its threads do.
    let stats = enable_statistics(Device::CPU).unwrap();
    let before = stats.statistics();
    let kept = on_threads(THREADS, |t| {
        for i in 0..ROUNDS {
            drop(DeviceBuffer::on_device(1 + (t * ROUNDS + i) % 61, Device::CPU).unwrap());
        }
        DeviceBuffer::on_device(100, Device::CPU).unwrap()
    });
    let after = get_statistics(Device::CPU).unwrap().unwrap();
    let total: usize = (0..THREADS * ROUNDS).map(|k| 1 + k % 61).sum::<usize>() + THREADS * 100;
    assert_eq!(after.total_bytes - before.total_bytes, total);
    assert_eq!(
        after.allocations - before.allocations,
        THREADS * (ROUNDS + 1)
    );
    assert_eq!(after.deallocations - before.deallocations, THREADS * ROUNDS);
    assert_eq!(after.current_bytes - before.current_bytes, THREADS * 100);
    drop(kept);
    assert_eq!(stats.current_bytes(), before.current_bytes);
}
