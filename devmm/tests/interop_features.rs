//! The `dlpark` and `allocator-api2` features (built by scripts/test.sh
//! with `--features dlpark,allocator-api2`; Cargo.toml requires them).

use std::sync::Arc;

use allocator_api2::vec::Vec as AVec;
use devmm::dlpack::{DlpackFlavor, DlpackRequest};
use devmm::interop::HostAllocator;
use devmm::{
    DType, EmptyOptions, Error, LimitingAdaptor, MallocMemoryResource, MemoryResource,
    StatisticsAdaptor, Tensor, empty,
};

#[test]
fn dlpark_both_ways_without_pointer_casts() {
    let mut t = empty(&[2, 3], DType::INT32, &EmptyOptions::new()).expect("allocates");
    for (i, slot) in t
        .as_mut_slice::<i32>()
        .expect("sole")
        .iter_mut()
        .enumerate()
    {
        slot.write(i as i32);
    }
    let theirs = dlpark::versioned::Dlpack::try_from(&t).expect("exports");
    let view = theirs.validate().expect("valid");
    assert_eq!(view.shape(), &[2, 3]);
    // SAFETY: the six elements were written above.
    let seen = unsafe { view.cpu_slice::<i32>() }.expect("cpu");
    assert_eq!(seen, &[0, 1, 2, 3, 4, 5]);
    assert_eq!(t.buffer().live_exports(), 1);
    let back = Tensor::try_from(theirs).expect("imports");
    assert_eq!(back.data_ptr(), t.data_ptr());
    drop(back);
    assert_eq!(
        t.buffer().live_exports(),
        0,
        "deleted once, through both crates"
    );

    let legacy = dlpark::legacy::Dlpack::try_from(&t).expect("exports legacy");
    let back = Tensor::try_from(legacy).expect("imports legacy");
    assert_eq!(back.shape(), t.shape());
    drop(back);
    assert_eq!(t.buffer().live_exports(), 0);

    let wrong = t.to_dlpack(&DlpackRequest::new()).expect("legacy export");
    assert_eq!(wrong.flavor(), DlpackFlavor::Legacy);
    let refused = dlpark::versioned::Dlpack::try_from(wrong);
    assert!(matches!(refused, Err(Error::Dlpack { .. })));
    assert_eq!(
        t.buffer().live_exports(),
        0,
        "the refused export was deleted"
    );
}

#[test]
fn vec_allocates_through_a_devmm_stack() {
    let stats = Arc::new(StatisticsAdaptor::new(LimitingAdaptor::new(
        MallocMemoryResource::new(),
        1 << 16,
    )));
    let alloc = HostAllocator::new(stats.clone()).expect("host memory");
    let mut v: AVec<u32, HostAllocator> = AVec::new_in(alloc.clone());
    v.extend(0..1000);
    assert_eq!(v.iter().sum::<u32>(), 499_500);
    assert!(stats.current_bytes() >= 4000 && stats.statistics().allocations >= 1);
    let mut too_big: AVec<u8, _> = AVec::new_in(alloc.clone());
    assert!(
        too_big.try_reserve(1 << 20).is_err(),
        "the limit is honoured"
    );
    let empty_vec: AVec<u8, _> = AVec::with_capacity_in(0, alloc);
    assert!(empty_vec.is_empty());
    drop(v);
    assert_eq!(stats.current_bytes(), 0);
    assert_eq!(
        stats.statistics().allocations,
        stats.statistics().deallocations
    );
}

#[test]
fn over_aligned_requests_and_device_memory_are_refused() {
    let mr: Arc<dyn MemoryResource> = Arc::new(MallocMemoryResource::new());
    let alloc = HostAllocator::new(mr).expect("host memory");
    #[repr(align(4096))]
    struct Page(#[allow(dead_code)] [u8; 16]);
    let mut pages: AVec<Page, _> = AVec::new_in(alloc);
    assert!(pages.try_reserve(1).is_err(), "above the 64-byte guarantee");
    let recording = Arc::new(devmm::testing::RecordingMemoryResource::on_device(
        devmm::Device::cuda(0),
    ));
    assert!(matches!(
        HostAllocator::new(recording),
        Err(Error::InvalidArgument { .. })
    ));
}

#[test]
fn host_memory_the_host_cannot_dereference_is_refused() {
    let recording = Arc::new(devmm::testing::RecordingMemoryResource::new());
    assert!(matches!(
        HostAllocator::new(recording),
        Err(Error::NotDereferenceable { .. })
    ));
}

#[test]
fn an_allocator_out_of_memory_runs_the_hooks_once() {
    let me = std::thread::current().id();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let hook = devmm::on_out_of_memory({
        let seen = Arc::clone(&seen);
        move |err| {
            if std::thread::current().id() == me {
                seen.lock()
                    .unwrap()
                    .push(err.out_of_memory_figures().map(|f| f.nbytes));
            }
            Ok(())
        }
    });
    let limited: Arc<dyn MemoryResource> =
        Arc::new(LimitingAdaptor::new(MallocMemoryResource::new(), 64));
    let mut v: AVec<u64, _> = AVec::new_in(HostAllocator::new(limited).expect("host memory"));
    assert!(
        v.try_reserve_exact(9).is_err(),
        "72 bytes past a 64-byte limit"
    );
    assert_eq!(*seen.lock().unwrap(), [Some(72)]);
    hook.remove();
}
