//! Adaptors: exact counting under threads, limits, structured logs, closures.

use std::sync::{Arc, Mutex};
use std::thread;

use devmm::mrs::cpu::{HeapMemoryResource, MallocMemoryResource};
use devmm::testing::RecordingMemoryResource;
use devmm::{
    CallbackMemoryResource, Checked, Device, DevicePtr, Error, LimitingAdaptor, LoggingAdaptor,
    MemoryResource, MisuseKind, StatisticsAdaptor, Stream, resource_chain,
};

#[test]
fn statistics_are_exact_under_many_threads() {
    let stats = Arc::new(StatisticsAdaptor::new(HeapMemoryResource::new()));
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let stats = Arc::clone(&stats);
            thread::spawn(move || {
                let stream = Stream::cpu();
                for i in 0..500 {
                    let n = 1 + (t * 500 + i) % 97;
                    let p = stats.allocate(n, &stream).unwrap();
                    // SAFETY: freed once with the size it was allocated with.
                    unsafe { stats.deallocate(p, n, &stream).unwrap() };
                }
                // Leave one allocation live per thread.
                stats.allocate(10, &stream).unwrap()
            })
        })
        .collect();
    let live: Vec<DevicePtr> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let expected_total: usize = (0..8 * 500).map(|k| 1 + k % 97).sum::<usize>() + 8 * 10;
    let s = stats.statistics();
    assert_eq!(s.current_bytes, 80);
    assert_eq!(s.total_bytes, expected_total);
    assert_eq!((s.allocations, s.deallocations), (8 * 501, 8 * 500));
    assert!(s.peak_bytes >= 80 && s.peak_bytes <= 8 * (97 + 10));
    assert_eq!(stats.live_count(), Some(8));
    for p in live {
        // SAFETY: each came from allocate(10) above.
        unsafe { stats.deallocate(p, 10, &Stream::cpu()).unwrap() };
    }
    assert_eq!(stats.current_bytes(), 0);
}

#[test]
fn limiting_never_overshoots_under_contention() {
    let upstream = Arc::new(StatisticsAdaptor::new(MallocMemoryResource::new()));
    let limited = Arc::new(LimitingAdaptor::new(Arc::clone(&upstream), 1000));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let limited = Arc::clone(&limited);
            thread::spawn(move || {
                let s = Stream::cpu();
                let mut held = Vec::new();
                for _ in 0..200 {
                    match limited.allocate(100, &s) {
                        Ok(p) => held.push(p),
                        Err(Error::LimitExceeded { limit: 1000, .. }) => {
                            if let Some(p) = held.pop() {
                                // SAFETY: allocated above with 100 bytes.
                                unsafe { limited.deallocate(p, 100, &s).unwrap() };
                            }
                        }
                        Err(other) => panic!("unexpected {other}"),
                    }
                    assert!(limited.used_bytes() <= 1000);
                }
                for p in held {
                    // SAFETY: allocated above with 100 bytes.
                    unsafe { limited.deallocate(p, 100, &s).unwrap() };
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(limited.used_bytes(), 0);
    assert!(
        upstream.peak_bytes() <= 1000,
        "upstream saw {}",
        upstream.peak_bytes()
    );
}

#[test]
fn limit_refusals_never_reach_upstream_and_name_the_chain() {
    let stats = StatisticsAdaptor::new(LimitingAdaptor::new(
        StatisticsAdaptor::new(MallocMemoryResource::new()),
        64,
    ));
    let err = stats.allocate(65, &Stream::cpu()).unwrap_err();
    assert_eq!(
        stats.get_upstream().get_upstream().statistics().allocations,
        0
    );
    assert!(err.is_out_of_memory());
    let msg = err.to_string();
    assert!(
        msg.contains("StatisticsAdaptor -> LimitingAdaptor -> StatisticsAdaptor -> MallocMemoryResource(device=cpu:0, alignment=64)"),
        "{msg}"
    );
    assert!(msg.contains("65 bytes on cpu:0"), "{msg}");
    // Failed allocations are not counted.
    assert_eq!(stats.statistics().allocations, 0);
}

#[test]
fn out_of_memory_from_upstream_names_the_whole_chain() {
    let mr = StatisticsAdaptor::new(LoggingAdaptor::new(MallocMemoryResource::new()));
    let err = mr.allocate(usize::MAX / 2, &Stream::cpu()).unwrap_err();
    match &err {
        Error::OutOfMemory {
            device,
            nbytes,
            chain,
            ..
        } => {
            assert_eq!((*device, *nbytes), (Device::CPU, usize::MAX / 2));
            assert_eq!(
                chain,
                "StatisticsAdaptor -> LoggingAdaptor -> MallocMemoryResource(device=cpu:0, alignment=64)"
            );
        }
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
    assert_eq!(
        resource_chain(&mr),
        "StatisticsAdaptor -> LoggingAdaptor -> MallocMemoryResource(device=cpu:0, alignment=64)"
    );
}

#[test]
fn callback_resources_call_the_closures_and_check_alignment() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let backing = Arc::new(HeapMemoryResource::new());
    let (log_a, log_d, heap_a, heap_d) = (
        calls.clone(),
        calls.clone(),
        backing.clone(),
        backing.clone(),
    );
    let mr = CallbackMemoryResource::new(
        Device::CPU,
        64,
        move |n, s| {
            log_a.lock().unwrap().push(format!("alloc {n}"));
            heap_a.allocate(n, s)
        },
        move |p, n, s| {
            log_d.lock().unwrap().push(format!("free {n}"));
            // SAFETY: the heap resource checks its arguments.
            unsafe { heap_d.deallocate(p, n, s) }
        },
    )
    .unwrap();
    let s = Stream::cpu();
    let p = mr.allocate(24, &s).unwrap();
    assert!(p.is_aligned(64));
    // SAFETY: allocated above with 24 bytes.
    unsafe { mr.deallocate(p, 24, &s).unwrap() };
    assert_eq!(*calls.lock().unwrap(), ["alloc 24", "free 24"]);
    assert_eq!(backing.live_count(), Some(0));

    // A closure that breaks the promised alignment is caught, and the memory
    // it handed out is given back.
    let heap = Arc::new(HeapMemoryResource::new());
    let (ha, hd) = (heap.clone(), heap.clone());
    let liar = CallbackMemoryResource::new(
        Device::CPU,
        4096,
        move |n, s| ha.allocate(n, s).map(|p| p.offset(8).unwrap()),
        // SAFETY: undoes the offset the allocate closure added.
        move |p, n, s| unsafe { hd.deallocate(DevicePtr::from_addr(p.addr() - 8), n, s) },
    )
    .unwrap();
    let err = liar.allocate(16, &s).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Misuse {
                kind: MisuseKind::Misaligned { promised: 4096 },
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(heap.live_count(), Some(0));
}

#[test]
fn adaptors_forward_probes() {
    let mr = StatisticsAdaptor::new(LimitingAdaptor::new(
        HeapMemoryResource::with_alignment(256).unwrap(),
        4096,
    ));
    assert_eq!(mr.device(), Device::CPU);
    assert_eq!(mr.guaranteed_alignment(), 256);
    assert!(!mr.stream_ordered());
    assert!(mr.detects_misuse());
    assert_eq!(mr.live_count(), Some(0));
    let info = mr.available_memory().unwrap();
    assert_eq!((info.free, info.total), (4096, 4096));
    let s = Stream::cpu();
    let p = mr.allocate(1000, &s).unwrap();
    assert_eq!(mr.available_memory().unwrap().free, 3096);
    // Misuse detected below propagates as a typed error and changes no counter.
    // SAFETY: the heap resource at the bottom checks its arguments.
    let err = unsafe { mr.deallocate(p, 999, &s) }.unwrap_err();
    assert!(matches!(
        err,
        Error::Misuse {
            kind: MisuseKind::WrongSize { allocated: 1000 },
            ..
        }
    ));
    assert_eq!(mr.current_bytes(), 1000);
    // SAFETY: now with the right size.
    unsafe { mr.deallocate(p, 1000, &s).unwrap() };
}

#[test]
fn null_deallocations_with_bytes_never_reach_the_counters() {
    let stats = StatisticsAdaptor::new(LimitingAdaptor::new(MallocMemoryResource::new(), 1024));
    let s = Stream::cpu();
    // SAFETY: a null pointer with bytes is refused before anything is freed.
    let err = unsafe { stats.deallocate(DevicePtr::NULL, 100, &s) }.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Misuse {
                kind: MisuseKind::UnknownPointer,
                nbytes: 100,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(stats.current_bytes(), 0);
    assert_eq!(stats.get_upstream().used_bytes(), 0);
    // The budget is intact: a full-size allocation still fits.
    let p = stats.allocate(1024, &s).unwrap();
    // SAFETY: allocated just above with 1024 bytes.
    unsafe { stats.deallocate(p, 1024, &s).unwrap() };
    // Zero-byte allocations are null and come back with zero bytes.
    let z = stats.allocate(0, &s).unwrap();
    // SAFETY: a zero-byte allocation returned with zero bytes.
    unsafe { stats.deallocate(z, 0, &s).unwrap() };
    // ... and are counted both ways (the null path forwards them), where
    // the refused free above is not.
    let st = stats.statistics();
    assert_eq!((st.allocations, st.deallocations), (2, 2), "{st:?}");
}

#[test]
fn callback_resources_refuse_bad_alignments_and_null_pointers() {
    for bad in [0, 3, 48, usize::MAX] {
        let err = CallbackMemoryResource::new(
            Device::CPU,
            bad,
            |_, _| Ok(DevicePtr::NULL),
            |_, _, _| Ok(()),
        )
        .unwrap_err();
        assert!(err.to_string().contains("power of two"), "{err}");
    }
    let null =
        CallbackMemoryResource::new(Device::CPU, 1, |_, _| Ok(DevicePtr::NULL), |_, _, _| Ok(()))
            .unwrap();
    let err = null.allocate(8, &Stream::cpu()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Misuse {
                kind: MisuseKind::NullAllocation,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(null.allocate(0, &Stream::cpu()).unwrap().is_null());
}

/// A resource of made-up addresses for any size, counting what is live.
fn fake_unbounded() -> (
    Arc<std::sync::atomic::AtomicUsize>,
    Checked<CallbackMemoryResource>,
) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(1 << 12);
    let live = Arc::new(AtomicUsize::new(0));
    let (up, down) = (live.clone(), live.clone());
    let mr = CallbackMemoryResource::new(
        Device::CPU,
        1,
        move |_, _| {
            up.fetch_add(1, Ordering::Relaxed);
            Ok(DevicePtr::from_addr(
                next.fetch_add(1 << 12, Ordering::Relaxed),
            ))
        },
        move |_, _, _| {
            down.fetch_sub(1, Ordering::Relaxed);
            Ok(())
        },
    )
    .unwrap();
    (live, Checked::new(mr))
}

#[test]
fn statistics_counter_overflow_is_an_error_and_returns_the_allocation() {
    let (live, fake) = fake_unbounded();
    let live = || live.load(std::sync::atomic::Ordering::Relaxed);
    let stats = StatisticsAdaptor::new(fake);
    let s = Stream::cpu();
    let half = usize::MAX / 2 + 1;
    let first = stats.allocate(half, &s).unwrap();
    let overflow = stats.allocate(half, &s).unwrap_err();
    assert!(
        matches!(
            overflow,
            Error::CounterOverflow { nbytes, counter: "current_bytes", .. } if nbytes == half
        ),
        "{overflow:?}"
    );
    assert!(
        overflow.to_string().contains("returned upstream"),
        "{overflow}"
    );
    // The second block went back upstream; the counters saw only the first.
    assert_eq!(live(), 1);
    let st = stats.statistics();
    assert_eq!(
        (st.current_bytes, st.total_bytes, st.allocations),
        (half, half, 1)
    );
    // SAFETY: `first` came from `stats.allocate(half, ..)`.
    unsafe { stats.deallocate(first, half, &s).unwrap() };
    assert_eq!((stats.current_bytes(), live()), (0, 0));
    // total_bytes overflows later than current_bytes, and is refused too.
    let total = stats.allocate(half, &s).unwrap_err();
    assert!(
        matches!(
            total,
            Error::CounterOverflow {
                counter: "total_bytes",
                ..
            }
        ),
        "{total:?}"
    );
    assert_eq!((stats.current_bytes(), live()), (0, 0));
}

/// Every shipped chain: `deallocate(NULL, 0)` frees nothing and succeeds;
/// `deallocate(NULL, n > 0)` names a pointer never handed out.
#[test]
fn freeing_null_is_one_rule_everywhere() {
    let never = |_: usize, _: &Stream| Ok(DevicePtr::NULL);
    let chains: Vec<Arc<dyn MemoryResource>> = vec![
        Arc::new(MallocMemoryResource::new()),
        Arc::new(HeapMemoryResource::new()),
        Arc::new(Checked::new(MallocMemoryResource::new())),
        Arc::new(RecordingMemoryResource::new()),
        Arc::new(CallbackMemoryResource::new(Device::CPU, 1, never, |_, _, _| Ok(())).unwrap()),
        Arc::new(StatisticsAdaptor::new(MallocMemoryResource::new())),
        Arc::new(LimitingAdaptor::new(MallocMemoryResource::new(), 64)),
        Arc::new(LoggingAdaptor::new(MallocMemoryResource::new())),
    ];
    let s = Stream::cpu();
    for mr in chains {
        // SAFETY: null with zero bytes is what a zero-byte allocation returns.
        unsafe { mr.deallocate(DevicePtr::NULL, 0, &s) }.unwrap();
        // SAFETY: the rule makes this an error, never a free.
        let refused = unsafe { mr.deallocate(DevicePtr::NULL, 16, &s) };
        assert!(
            matches!(
                refused,
                Err(Error::Misuse {
                    kind: MisuseKind::UnknownPointer,
                    ..
                })
            ),
            "{mr:?}: {refused:?}"
        );
    }
}

#[test]
fn a_wrong_size_free_through_counting_adaptors_over_a_checked_resource_changes_no_counter() {
    let stats = Arc::new(StatisticsAdaptor::new(Checked::new(
        MallocMemoryResource::new(),
    )));
    let limiting = LimitingAdaptor::new(stats.clone(), 1024);
    let s = Stream::cpu();
    let p = limiting.allocate(64, &s).unwrap();
    // SAFETY: the checked resource refuses the wrong size before `free`.
    let wrong = unsafe { limiting.deallocate(p, 32, &s) };
    assert!(matches!(
        wrong,
        Err(Error::Misuse {
            kind: MisuseKind::WrongSize { allocated: 64 },
            ..
        })
    ));
    assert_eq!(
        (
            stats.current_bytes(),
            limiting.used_bytes(),
            stats.statistics().deallocations
        ),
        (64, 64, 0)
    );
    // SAFETY: the right size this time.
    unsafe { limiting.deallocate(p, 64, &s).unwrap() };
    assert_eq!((stats.current_bytes(), limiting.used_bytes()), (0, 0));
    assert_eq!(limiting.live_count(), Some(0));
}

#[test]
fn a_checked_resource_keeps_a_pointer_its_upstream_failed_to_free() {
    let fail = Arc::new(Mutex::new(true));
    let failing = fail.clone();
    let cb = CallbackMemoryResource::new(
        Device::CPU,
        1,
        |_, _| Ok(DevicePtr::from_addr(0x4000)),
        move |_, _, _| match *failing.lock().unwrap() {
            true => Err(Error::InvalidArgument {
                reason: "busy".into(),
            }),
            false => Ok(()),
        },
    )
    .unwrap();
    let mr = Checked::new(cb);
    let s = Stream::cpu();
    let p = mr.allocate(8, &s).unwrap();
    // SAFETY: `p` came from `mr.allocate(8, ..)`.
    assert!(unsafe { mr.deallocate(p, 8, &s) }.is_err());
    assert_eq!(mr.live_count(), Some(1));
    *fail.lock().unwrap() = false;
    // SAFETY: still live: the failed free did not release it.
    unsafe { mr.deallocate(p, 8, &s).unwrap() };
    assert_eq!(mr.live_count(), Some(0));
}

#[test]
fn reset_peak_starts_a_window_at_the_live_bytes() {
    let stats = StatisticsAdaptor::new(HeapMemoryResource::new());
    let stream = Stream::cpu();
    let kept = stats.allocate(100, &stream).unwrap();
    let gone = stats.allocate(400, &stream).unwrap();
    // SAFETY: freed once with the size it was allocated with.
    unsafe { stats.deallocate(gone, 400, &stream).unwrap() };
    assert_eq!(stats.peak_bytes(), 500);
    stats.reset_peak();
    assert_eq!(stats.peak_bytes(), 100);
    let more = stats.allocate(50, &stream).unwrap();
    assert_eq!(stats.peak_bytes(), 150);
    // The other counters are not windows: they keep counting from the start.
    assert_eq!(
        (stats.total_bytes(), stats.statistics().allocations),
        (550, 3)
    );
    // SAFETY: as above.
    unsafe {
        stats.deallocate(more, 50, &stream).unwrap();
        stats.deallocate(kept, 100, &stream).unwrap();
    }
}

/// A resource that counts how often a chain above it asks its probes: the
/// measure of a chain's walks, with no clock.
#[derive(Debug, Default)]
struct ProbeCounting {
    inner: MallocMemoryResource,
    probes: std::sync::atomic::AtomicUsize,
}

impl ProbeCounting {
    fn asked(&self) -> usize {
        self.probes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }
}

impl MemoryResource for ProbeCounting {
    fn allocate(&self, nbytes: usize, stream: &Stream) -> devmm::Result<DevicePtr> {
        self.inner.allocate(nbytes, stream)
    }
    unsafe fn deallocate(
        &self,
        ptr: DevicePtr,
        nbytes: usize,
        stream: &Stream,
    ) -> devmm::Result<()> {
        // SAFETY: forwarded from the caller; `inner` allocated `ptr`.
        unsafe { self.inner.deallocate(ptr, nbytes, stream) }
    }
    fn device(&self) -> Device {
        self.asked();
        self.inner.device()
    }
    fn stream_ordered(&self) -> bool {
        self.asked();
        false
    }
    fn guaranteed_alignment(&self) -> usize {
        self.asked();
        self.inner.guaranteed_alignment()
    }
    fn dereferenceable(&self) -> bool {
        self.asked();
        true
    }
    fn detects_misuse(&self) -> bool {
        self.asked();
        false
    }
    fn available_memory(&self) -> devmm::Result<devmm::MemoryInfo> {
        self.inner.available_memory()
    }
}

/// Building a chain asks each new adaptor its device and alignment (as the
/// Python binding does): with every probe walking down to the base that
/// was quadratic in the depth; an adaptor answers from its upstream's
/// answers, asked once, so the base is asked a fixed number of times
/// however deep the chain.
#[test]
fn building_a_deep_chain_asks_the_base_a_fixed_number_of_times() {
    const DEPTH: usize = 400;
    let base = Arc::new(ProbeCounting::default());
    let mut top: Arc<dyn MemoryResource> = base.clone();
    for level in 0..DEPTH {
        top = match level % 4 {
            0 => Arc::new(StatisticsAdaptor::new(top)),
            1 => Arc::new(LimitingAdaptor::new(top, usize::MAX)),
            2 => Arc::new(LoggingAdaptor::new(top)),
            _ => Arc::new(devmm::TrackingAdaptor::new(top)),
        };
        // The binding wraps each adaptor for its Python object, too.
        top = Arc::new(devmm::WithOrigin::new(top, Arc::new(level)));
        assert_eq!(top.device(), Device::CPU);
        assert!(top.dereferenceable() && !top.stream_ordered() && !top.detects_misuse());
        assert_eq!(top.guaranteed_alignment(), 64);
    }
    let asked = base.probes.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        asked <= 10,
        "the base was asked {asked} probes for a chain of {DEPTH}"
    );
    // Naming the chain walks a bounded part of it.
    let named = resource_chain(&*top);
    assert!(
        named.ends_with(" -> ... (deeper links not shown)"),
        "{named}"
    );
    assert_eq!(named.matches(" -> ").count(), 32, "{named}");
    let s = Stream::cpu();
    let p = top.allocate(8, &s).unwrap();
    // SAFETY: freed once with the size it was allocated with.
    unsafe { top.deallocate(p, 8, &s).unwrap() };
}
