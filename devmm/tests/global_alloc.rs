//! A test binary whose global allocator is a devmm stack: every heap
//! allocation of the process is counted by the statistics adaptor.
//! Runs under valgrind too (scripts/valgrind.sh).

use devmm::interop::GlobalResource;
use devmm::{DType, EmptyOptions, MallocMemoryResource, StatisticsAdaptor, empty};

#[global_allocator]
static GLOBAL: GlobalResource<StatisticsAdaptor<MallocMemoryResource>> =
    GlobalResource::new(StatisticsAdaptor::new(MallocMemoryResource::new()));

#[test]
fn heap_allocations_go_through_the_resource() {
    let stats = GLOBAL.resource();
    let (allocs, total) = (stats.statistics().allocations, stats.total_bytes());
    let v: Vec<u8> = Vec::with_capacity(1 << 20);
    assert!(stats.statistics().allocations > allocs);
    assert!(
        stats.total_bytes() >= total + (1 << 20),
        "the megabyte was counted"
    );
    let during = stats.statistics().deallocations;
    drop(v);
    assert!(stats.statistics().deallocations > during);
}

#[test]
fn growth_alignment_and_threads_round_trip() {
    let mut grown: Vec<u64> = Vec::new();
    for i in 0..10_000 {
        grown.push(i); // realloc through alloc/copy/dealloc
    }
    assert_eq!(grown.iter().sum::<u64>(), 49_995_000);
    // Above MallocMemoryResource's 64-byte guarantee: served by the system.
    #[repr(align(4096))]
    struct Page([u8; 4096]);
    let page = Box::new(Page([7; 4096]));
    assert_eq!(&*page as *const Page as usize % 4096, 0);
    assert_eq!(page.0[4095], 7);
    let handles: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || (0..1000).map(|i| vec![t; i % 64].len()).sum::<usize>())
        })
        .collect();
    for h in handles {
        assert_eq!(
            h.join().expect("joins"),
            (0..1000).map(|i| i % 64).sum::<usize>()
        );
    }
}

#[test]
fn devmm_itself_runs_on_top_of_it() {
    let t = empty(&[64, 64], DType::FLOAT32, &EmptyOptions::new()).expect("allocates");
    assert_eq!(t.numel(), 4096);
    assert!(GLOBAL.resource().peak_bytes() > 0);
}
