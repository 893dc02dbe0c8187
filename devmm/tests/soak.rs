//! Soak: 8 threads, a fixed number of operations each, mixing every CPU
//! resource (checked and self-checking), every adaptor, raw calls,
//! buffers freed every way, DLPack exports released before and after the
//! buffer's free, and misuse that must be refused; then every counter
//! exact and nothing live.

use std::sync::Arc;
use std::thread;

use devmm::dlpack::DlpackRequest;
use devmm::mrs::cpu::{HeapMemoryResource, MallocMemoryResource};
use devmm::{
    Checked, DType, DeviceBuffer, EmptyOptions, Error, LimitingAdaptor, LoggingAdaptor,
    MemoryResource, MisuseKind, StatisticsAdaptor, Stream, empty,
};

const THREADS: u64 = 8;
const OPS: u64 = 2_000;

type Stats = StatisticsAdaptor<Arc<dyn MemoryResource>>;

/// A tiny deterministic generator (xorshift), one per thread.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[test]
fn eight_threads_end_with_exact_counters_and_nothing_live() {
    let leaves: Vec<Arc<dyn MemoryResource>> = vec![
        Arc::new(Checked::new(MallocMemoryResource::new())),
        Arc::new(HeapMemoryResource::new()),
        Arc::new(Checked::new(
            HeapMemoryResource::with_alignment(256).unwrap(),
        )),
    ];
    let stats: Vec<Arc<Stats>> = leaves
        .iter()
        .map(|leaf| Arc::new(StatisticsAdaptor::new(Arc::clone(leaf))))
        .collect();
    let limits: Vec<Arc<LimitingAdaptor<Arc<Stats>>>> = stats
        .iter()
        .map(|s| Arc::new(LimitingAdaptor::new(Arc::clone(s), 1 << 30)))
        .collect();
    // Each chain with the index of the statistics adaptor it counts through.
    let mut chains: Vec<(usize, Arc<dyn MemoryResource>)> = Vec::new();
    for (i, limit) in limits.iter().enumerate() {
        chains.push((i, stats[i].clone()));
        chains.push((i, limit.clone()));
        chains.push((i, Arc::new(LoggingAdaptor::new(Arc::clone(limit)))));
    }
    let chains = Arc::new(chains);
    let workers: Vec<_> = (0..THREADS)
        .map(|seed| {
            let chains = Arc::clone(&chains);
            thread::spawn(move || work(seed, &chains))
        })
        .collect();
    let mut expected = vec![(0usize, 0usize); stats.len()];
    for worker in workers {
        for (i, (bytes, count)) in worker.join().unwrap().into_iter().enumerate() {
            expected[i].0 += bytes;
            expected[i].1 += count;
        }
    }
    for (i, stats) in stats.iter().enumerate() {
        let st = stats.statistics();
        assert_eq!(st.current_bytes, 0, "{stats:?}");
        assert_eq!((st.total_bytes, st.allocations), expected[i], "{stats:?}");
        assert_eq!(st.deallocations, st.allocations, "{stats:?}");
        assert!(st.peak_bytes <= st.total_bytes);
        assert_eq!(stats.live_count(), Some(0), "{stats:?}");
        assert_eq!(limits[i].used_bytes(), 0);
    }
    let ops: usize = expected.iter().map(|e| e.1).sum();
    assert!(ops as u64 > THREADS * OPS / 2, "{ops} allocations");
}

/// Runs one thread's operations; returns (bytes, allocations) per
/// statistics adaptor.
fn work(seed: u64, chains: &[(usize, Arc<dyn MemoryResource>)]) -> Vec<(usize, usize)> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (seed + 1));
    let mut counted = vec![(0usize, 0usize); 3];
    let s = Stream::cpu();
    // Misuse goes to a resource of this thread's own: on a shared one a
    // double free could name a block another thread was just handed.
    let own = StatisticsAdaptor::new(Checked::new(MallocMemoryResource::new()));
    for _ in 0..OPS {
        let (i, mr) = &chains[rng.below(chains.len() as u64) as usize];
        match rng.below(4) {
            0 => {
                let n = [0, 1, 64, 1000, 4096][rng.below(5) as usize];
                let p = mr.allocate(n, &s).unwrap();
                // SAFETY: `p` came from `mr.allocate(n, ..)`.
                unsafe { mr.deallocate(p, n, &s).unwrap() };
                counted[*i].0 += n;
                counted[*i].1 += 1;
            }
            1 => {
                let n = [1, 100, 8192][rng.below(3) as usize];
                let buf = DeviceBuffer::new(n, Arc::clone(mr), &s).unwrap();
                counted[*i].0 += n;
                counted[*i].1 += 1;
                if rng.below(2) == 0 {
                    buf.free(&s).unwrap();
                    buf.free(&s).unwrap();
                }
            }
            2 => {
                let shape = [1 + rng.below(4) as usize, 1 + rng.below(6) as usize];
                let options = EmptyOptions::new().resource(Arc::clone(mr));
                let t = empty(&shape, DType::FLOAT32, &options).unwrap();
                counted[*i].0 += t.buffer().nbytes();
                counted[*i].1 += 1;
                let export = t
                    .to_dlpack(&DlpackRequest::new().max_version(1, 0))
                    .unwrap();
                if rng.below(2) == 0 {
                    // Deferred: the export still holds the memory.
                    t.buffer().free(&s).unwrap();
                    assert_eq!(t.buffer().live_exports(), 1);
                    drop(t);
                    drop(export);
                } else {
                    drop(export);
                    drop(t);
                }
            }
            _ => {
                let p = own.allocate(64, &s).unwrap();
                for (ptr, n) in [
                    (p.offset(8).unwrap(), 64),
                    (p, 32),
                    (devmm::DevicePtr::NULL, 16),
                ] {
                    // SAFETY: the checked resource refuses these before `free`.
                    let refused = unsafe { own.deallocate(ptr, n, &s) };
                    assert!(matches!(refused, Err(Error::Misuse { .. })), "{refused:?}");
                }
                // SAFETY: the pointer and size `allocate` gave.
                unsafe { own.deallocate(p, 64, &s).unwrap() };
                // SAFETY: refused: a double free.
                let again = unsafe { own.deallocate(p, 64, &s) };
                assert!(matches!(
                    again,
                    Err(Error::Misuse {
                        kind: MisuseKind::DoubleFree,
                        ..
                    })
                ));
            }
        }
    }
    let st = own.statistics();
    assert_eq!((st.current_bytes, st.allocations), (0, st.deallocations));
    counted
}
