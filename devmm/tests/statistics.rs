//! `devmm::statistics`: enable, get, push/pop, nested scopes per thread,
//! the profiler.

use std::sync::{Arc, Barrier};
use std::thread;

use devmm::statistics::{
    OrderBy, Profiler, ProfilerRecords, get_statistics, pop_statistics, push_statistics, statistics,
};
use devmm::{Device, DeviceBuffer, Statistics};

const CPU: Device = Device::CPU;

fn buffer(n: usize) -> DeviceBuffer {
    DeviceBuffer::on_device(n, CPU).unwrap()
}

#[test]
fn push_and_pop_nest_and_outer_scopes_see_inner_allocations() {
    assert_eq!(pop_statistics(CPU), None);
    push_statistics(CPU).unwrap();
    let a = buffer(100);
    push_statistics(CPU).unwrap();
    let b = buffer(50);
    drop(b);
    let inner = pop_statistics(CPU).unwrap();
    assert_eq!(
        inner,
        Statistics {
            current_bytes: 0,
            peak_bytes: 50,
            total_bytes: 50,
            allocations: 1,
            deallocations: 1
        }
    );
    let outer = get_statistics(CPU).unwrap().unwrap();
    assert_eq!(
        (outer.current_bytes, outer.peak_bytes, outer.total_bytes),
        (100, 150, 150)
    );
    drop(a);
    let outer = pop_statistics(CPU).unwrap();
    assert_eq!(
        (outer.current_bytes, outer.allocations, outer.deallocations),
        (0, 2, 2)
    );
}

#[test]
fn scopes_on_other_threads_never_see_each_others_allocations() {
    let barrier = Arc::new(Barrier::new(4));
    let threads: Vec<_> = (1..=4usize)
        .map(|t| {
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || {
                let outer = statistics(CPU).unwrap();
                let _mine = buffer(t * 1000);
                // Every thread is inside its scope with its buffer live.
                barrier.wait();
                let inner = statistics(CPU).unwrap();
                let nested = buffer(t);
                barrier.wait();
                let seen = get_statistics(CPU).unwrap().unwrap();
                drop(nested);
                (outer.statistics(), inner.statistics(), seen)
            })
        })
        .collect();
    for (t, handle) in (1..=4usize).zip(threads) {
        let (outer, inner, seen) = handle.join().unwrap();
        assert_eq!((seen.current_bytes, seen.total_bytes), (t, t));
        assert_eq!((inner.current_bytes, inner.peak_bytes), (0, t));
        assert_eq!(
            (outer.current_bytes, outer.peak_bytes),
            (t * 1000, t * 1001)
        );
    }
    // The scopes are gone with their threads; this thread never had one.
    assert!(get_statistics(CPU).unwrap().is_none());
}

#[test]
fn a_closed_scope_still_counts_the_frees_of_what_it_allocated() {
    let scope = statistics(CPU).unwrap();
    let kept = buffer(64);
    let adaptor = Arc::clone(scope.adaptor());
    drop(scope);
    assert_eq!(adaptor.current_bytes(), 64);
    drop(kept);
    assert_eq!(adaptor.current_bytes(), 0);
}

#[test]
fn the_profiler_records_calls_peaks_and_totals_per_name() {
    let records = ProfilerRecords::new();
    for n in [10, 30, 20] {
        let _region = Profiler::start("step", &records, CPU).unwrap();
        let _a = buffer(n);
        let _b = buffer(n);
    }
    {
        let _region = Profiler::start("load", &records, CPU).unwrap();
        drop(buffer(1000));
    }
    let step = records.records()["step"];
    assert_eq!(
        (step.num_calls, step.memory_total, step.memory_peak),
        (3, 120, 60)
    );
    let by_peak = records.report(OrderBy::MemoryPeak);
    let by_calls = records.report(OrderBy::NumCalls);
    assert!(by_peak.find("load") < by_peak.find("step"), "{by_peak}");
    assert!(by_calls.find("step") < by_calls.find("load"), "{by_calls}");
    assert!(by_peak.contains("Name"), "{by_peak}");
    assert!("memory_size".parse::<OrderBy>().is_err());
}
