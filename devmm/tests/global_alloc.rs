//! A test binary whose global allocator is a devmm stack: every heap
//! allocation of the process is counted by the statistics adaptor.
//! Runs under valgrind too (scripts/valgrind.sh).

use std::alloc::{GlobalAlloc, Layout, System};

use devmm::interop::GlobalResource;
use devmm::testing::RecordingMemoryResource;
use devmm::{
    CallbackMemoryResource, DType, Device, DevicePtr, EmptyOptions, MallocMemoryResource,
    StatisticsAdaptor, empty,
};

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

/// A resource over the system allocator whose calls panic when asked to.
fn panicking(on_allocate: bool, on_deallocate: bool) -> CallbackMemoryResource {
    CallbackMemoryResource::new(
        Device::CPU,
        16,
        move |nbytes, _| {
            assert!(!on_allocate, "allocate panics");
            let layout = Layout::from_size_align(nbytes, 16).expect("a layout");
            // SAFETY: `nbytes` includes GlobalResource's header, never zero.
            Ok(DevicePtr::from_addr(
                unsafe { System.alloc(layout) } as usize
            ))
        },
        move |ptr, nbytes, _| {
            let layout = Layout::from_size_align(nbytes, 16).expect("a layout");
            // SAFETY: allocated just above with this layout.
            unsafe { System.dealloc(ptr.as_host_ptr::<u8>(), layout) };
            assert!(!on_deallocate, "deallocate panics");
            Ok(())
        },
    )
    .expect("a resource")
    .with_dereferenceable_memory(true)
}

#[test]
fn a_panicking_resource_never_unwinds_out_of_the_allocator() {
    let layout = Layout::from_size_align(32, 8).expect("a layout");
    let failing = GlobalResource::new(panicking(true, false));
    // SAFETY: a non-zero-sized layout.
    assert!(unsafe { failing.alloc(layout) }.is_null());
    let failing = GlobalResource::new(panicking(false, true));
    // SAFETY: a non-zero-sized layout; the block is handed back once.
    unsafe {
        let p = failing.alloc(layout);
        assert!(!p.is_null());
        p.write_bytes(1, 32);
        failing.dealloc(p, layout);
    }
}

#[test]
fn memory_the_host_cannot_dereference_is_never_handed_out() {
    let layout = Layout::from_size_align(32, 8).expect("a layout");
    let fake = GlobalResource::new(RecordingMemoryResource::new());
    // SAFETY: a non-zero-sized layout.
    assert!(unsafe { fake.alloc(layout) }.is_null());
}
