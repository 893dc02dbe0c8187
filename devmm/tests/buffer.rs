//! DeviceBuffer: ownership, release exactly once, copies.

use std::sync::Arc;

use devmm::mrs::cpu::HeapMemoryResource;
use devmm::{DeviceBuffer, Error, MemoryResource, StatisticsAdaptor, Stream};

fn heap() -> Arc<StatisticsAdaptor<HeapMemoryResource>> {
    Arc::new(StatisticsAdaptor::new(HeapMemoryResource::new()))
}

#[test]
fn drop_releases_once_on_the_allocation_stream() {
    let mr = heap();
    let buf = DeviceBuffer::new(100, mr.clone(), &Stream::cpu()).unwrap();
    assert_eq!((mr.current_bytes(), mr.live_count()), (100, Some(1)));
    assert_eq!(buf.nbytes(), 100);
    assert!(buf.ptr().is_aligned(64));
    drop(buf);
    let s = mr.statistics();
    assert_eq!((s.current_bytes, s.deallocations), (0, 1));
}

#[test]
fn free_is_explicit_and_idempotent() {
    let mr = heap();
    let buf = DeviceBuffer::new(32, mr.clone(), &Stream::cpu()).unwrap();
    assert!(!buf.is_closed());
    buf.free(&Stream::cpu()).unwrap();
    buf.free(&Stream::cpu()).unwrap();
    assert!(buf.is_closed());
    drop(buf);
    assert_eq!(mr.statistics().deallocations, 1);
}

#[test]
fn the_buffer_keeps_its_resource_alive() {
    let mr = heap();
    let buf = DeviceBuffer::new(8, mr.clone(), &Stream::cpu()).unwrap();
    let weak = Arc::downgrade(&mr);
    drop(mr);
    assert!(
        weak.upgrade().is_some(),
        "the buffer still owns the resource"
    );
    drop(buf);
    assert!(weak.upgrade().is_none(), "released with the last buffer");
}

#[test]
fn copies_round_trip_and_are_bounds_checked() {
    let buf = DeviceBuffer::new(5, heap(), &Stream::cpu()).unwrap();
    // SAFETY: the heap resource hands out real host memory (so below).
    unsafe { buf.copy_from_host(b"abcde").unwrap() };
    let mut back = [0u8; 5];
    // SAFETY: as above.
    unsafe { buf.copy_to_host(&mut back).unwrap() };
    assert_eq!(&back, b"abcde");
    // SAFETY: as above.
    let too_long = unsafe { buf.copy_from_host(b"abcdef") }.unwrap_err();
    assert!(
        too_long
            .to_string()
            .contains("of a 5-byte buffer on cpu:0: the copy does not fit"),
        "{too_long}"
    );
    buf.free(buf.stream()).unwrap();
    // SAFETY: as above.
    let closed = unsafe { buf.copy_to_host(&mut back) };
    assert!(matches!(closed, Err(Error::BufferClosed { nbytes: 5, .. })));
    assert_eq!(buf.live_exports(), 0, "a refused copy holds nothing");
}

/// `copy_len` is the rule the copies apply (and a binding applies before
/// it makes host memory): the default is all that follows the offset, and
/// nothing past the end fits, however large the numbers.
#[test]
fn copy_len_defaults_to_the_rest_and_refuses_what_does_not_fit() {
    let buf = DeviceBuffer::new(5, heap(), &Stream::cpu()).unwrap();
    assert_eq!(buf.copy_len(0, None).unwrap(), 5);
    assert_eq!(buf.copy_len(2, None).unwrap(), 3);
    assert_eq!(buf.copy_len(5, None).unwrap(), 0);
    assert_eq!(buf.copy_len(1, Some(4)).unwrap(), 4);
    for (offset, len, shown) in [
        (6, None, 0),
        (1, Some(5), 5),
        (usize::MAX, Some(usize::MAX), usize::MAX),
        (0, Some(usize::MAX), usize::MAX),
        (7, None, 0),
    ] {
        let refused = buf.copy_len(offset, len).unwrap_err();
        assert!(matches!(refused, Error::Refused { .. }), "{refused:?}");
        assert_eq!(
            refused.to_string(),
            format!(
                "cannot copy {shown} bytes at offset {offset} of a 5-byte buffer on cpu:0: the \
                 copy does not fit; copy fewer bytes or use a larger buffer"
            )
        );
    }
    // The copies refuse with the same error.
    let mut back = [0u8; 4];
    // SAFETY: the heap resource hands out real host memory.
    let refused =
        unsafe { buf.copy_to_host_at(usize::MAX, &mut back, &Stream::cpu()) }.unwrap_err();
    let Error::Refused { reason } = refused else {
        panic!("{refused}")
    };
    assert_eq!(
        reason,
        buf.copy_len(usize::MAX, Some(4)).unwrap_err().to_string()
    );
}

/// A collector's release frees once and reports nothing; a second one is
/// the idempotent `free`.
#[test]
fn free_or_log_frees_on_the_allocation_stream() {
    let mr = heap();
    let buf = DeviceBuffer::new(16, mr.clone(), &Stream::cpu()).unwrap();
    buf.free_or_log();
    buf.free_or_log();
    assert!(buf.is_closed());
    assert_eq!(mr.statistics().deallocations, 1);
}

/// A device named with a resource must be the resource's.
#[test]
fn device_for_checks_the_device_asked_against_the_resource() {
    let mr = heap();
    assert_eq!(devmm::device_for(&*mr, None), Ok(devmm::Device::CPU));
    assert_eq!(
        devmm::device_for(&*mr, Some(devmm::Device::CPU)),
        Ok(devmm::Device::CPU)
    );
    let refused = devmm::device_for(&*mr, Some(devmm::Device::cuda(0))).unwrap_err();
    assert!(
        refused
            .to_string()
            .starts_with("device cuda:0 was asked for, but mr lives on cpu:0 (")
    );
    assert!(
        refused
            .to_string()
            .contains("allocates on cpu:0 only); pass a resource of cuda:0")
    );
}

/// A stream of another device is refused for the memory's work, with the
/// whole message as its text; the CUDA stream protocol is CUDA's alone.
#[test]
fn streams_check_their_device_and_speak_cuda_only_on_cuda() {
    let cpu = Stream::cpu();
    assert!(cpu.check_device(devmm::Device::CPU).is_ok());
    let refused = cpu.check_device(devmm::Device::cuda(1)).unwrap_err();
    assert_eq!(
        refused.to_string(),
        "stream device cpu:0 does not match the memory's device cuda:1; pass a stream of cuda:1"
    );
    assert!(matches!(refused, Error::Refused { .. }));
    assert_eq!(cpu.cuda_stream(), None);
    let names = [
        devmm::DEFAULT,
        devmm::LEGACY_DEFAULT,
        devmm::PER_THREAD_DEFAULT,
    ]
    .map(|s| s.name());
    assert_eq!(names, ["DEFAULT", "LEGACY_DEFAULT", "PER_THREAD_DEFAULT"]);
}

/// The binding's `repr` is the buffer's `Display`.
#[test]
fn a_buffer_displays_as_the_binding_repr() {
    let buf = DeviceBuffer::new(8, heap(), &Stream::cpu()).unwrap();
    let open = format!(
        "DeviceBuffer(ptr={:#x}, nbytes=8, device=cpu:0, closed=False)",
        buf.ptr().addr()
    );
    assert_eq!(buf.to_string(), open);
    buf.free(buf.stream()).unwrap();
    assert!(buf.to_string().ends_with("closed=True)"));
}

/// A free that lands while a copy runs waits for the copy: the memory goes
/// back when the copy's hold ends, not under it.
#[test]
fn free_during_a_copy_defers_the_release() {
    let mr = heap();
    let buf = Arc::new(DeviceBuffer::new(1 << 20, mr.clone(), &Stream::cpu()).unwrap());
    let copier = {
        let buf = Arc::clone(&buf);
        std::thread::spawn(move || {
            let data = vec![7u8; 1 << 20];
            for _ in 0..200 {
                // SAFETY: the heap resource hands out real host memory.
                match unsafe { buf.copy_from_host(&data) } {
                    Ok(()) | Err(Error::BufferClosed { .. }) => {}
                    Err(other) => panic!("{other}"),
                }
            }
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(1));
    buf.free(&Stream::cpu()).unwrap();
    copier.join().unwrap();
    assert_eq!((mr.current_bytes(), buf.live_exports()), (0, 0));
    assert_eq!(mr.statistics().deallocations, 1);
}

/// The resource's deallocate runs without the buffer's lock held, so user
/// code in it may look at the buffer.
#[test]
fn deallocate_may_look_at_the_buffer() {
    use std::sync::Mutex;
    let seen: Arc<Mutex<Option<Arc<DeviceBuffer>>>> = Arc::default();
    let backing = Arc::new(HeapMemoryResource::new());
    let (a, d, peek) = (backing.clone(), backing.clone(), seen.clone());
    let mr = devmm::CallbackMemoryResource::new(
        devmm::Device::CPU,
        64,
        move |n, s| a.allocate(n, s),
        move |p, n, s| {
            if let Some(buf) = peek.lock().unwrap().as_ref() {
                assert!(buf.is_closed());
                assert_eq!(buf.live_exports(), 0);
            }
            // SAFETY: forwarded from the buffer's single release.
            unsafe { d.deallocate(p, n, s) }
        },
    )
    .unwrap();
    let buf = Arc::new(DeviceBuffer::new(16, Arc::new(mr), &Stream::cpu()).unwrap());
    *seen.lock().unwrap() = Some(Arc::clone(&buf));
    buf.free(&Stream::cpu()).unwrap();
    assert_eq!(backing.live_count(), Some(0));
    seen.lock().unwrap().take();
}

#[test]
fn a_resource_returning_null_for_real_bytes_is_refused() {
    let null_mr = devmm::CallbackMemoryResource::new(
        devmm::Device::CPU,
        1,
        |_, _| Ok(devmm::DevicePtr::NULL),
        |_, _, _| Ok(()),
    )
    .unwrap();
    let err = DeviceBuffer::new(8, Arc::new(null_mr), &Stream::cpu()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Misuse {
                kind: devmm::MisuseKind::NullAllocation,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn zero_byte_buffers_are_legal() {
    let mr = heap();
    let buf = DeviceBuffer::new(0, mr.clone(), &Stream::cpu()).unwrap();
    assert!(buf.ptr().is_null());
    // SAFETY: nothing is copied.
    unsafe { buf.copy_from_host(&[]).unwrap() };
    drop(buf);
    assert_eq!(mr.statistics().allocations, 1);
    assert_eq!(mr.statistics().deallocations, 1);
}

#[test]
fn allocation_failures_are_typed_errors() {
    let err = DeviceBuffer::new(usize::MAX, heap(), &Stream::cpu()).unwrap_err();
    assert!(err.is_out_of_memory(), "{err}");
    assert!(
        err.to_string()
            .contains("StatisticsAdaptor -> HeapMemoryResource"),
        "{err}"
    );
}

#[test]
fn on_device_uses_the_current_resource() {
    let buf = DeviceBuffer::on_device(16, devmm::Device::CPU).unwrap();
    assert_eq!(
        format!("{:?}", buf.resource()),
        "MallocMemoryResource(device=cpu:0, alignment=64)"
    );
}

#[test]
fn host_copies_are_refused_unless_the_resource_declares_real_memory() {
    use devmm::testing::RecordingMemoryResource;
    use devmm::{CallbackMemoryResource, Device, DevicePtr};
    let s = Stream::cpu();
    let fake = CallbackMemoryResource::new(
        Device::CPU,
        1,
        |_, _| Ok(DevicePtr::from_addr(0x1000)),
        |_, _, _| Ok(()),
    )
    .unwrap();
    let resources: Vec<Arc<dyn MemoryResource>> = vec![
        Arc::new(RecordingMemoryResource::new()),
        Arc::new(StatisticsAdaptor::new(fake)),
    ];
    for mr in resources {
        let buf = DeviceBuffer::new(16, mr, &s).unwrap();
        // SAFETY: refused before any memory is touched.
        let write = unsafe { buf.copy_from_host(&[1; 16]) }.unwrap_err();
        assert!(
            matches!(
                write,
                Error::NotDereferenceable {
                    operation: "a host copy",
                    ..
                }
            ),
            "{write:?}"
        );
        let mut back = [0; 4];
        // SAFETY: as above.
        let read = unsafe { buf.copy_to_host(&mut back) }.unwrap_err();
        assert!(matches!(read, Error::NotDereferenceable { .. }), "{read:?}");
        buf.free(&s).unwrap();
    }
}

#[test]
fn a_failed_free_leaves_the_buffer_live_and_open() {
    use devmm::{CallbackMemoryResource, Device, DevicePtr};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let mr = CallbackMemoryResource::new(
        Device::CPU,
        1,
        |_, _| Ok(DevicePtr::from_addr(0x2000)),
        move |_, _, _| match counted.fetch_add(1, Ordering::Relaxed) {
            0 => Err(Error::InvalidArgument {
                reason: "the allocator is busy".into(),
            }),
            _ => Ok(()),
        },
    )
    .unwrap();
    let s = Stream::cpu();
    let buf = DeviceBuffer::new(8, Arc::new(mr), &s).unwrap();
    let failed = buf.free(&s).unwrap_err();
    assert!(
        matches!(&failed, Error::FreeFailed { nbytes: 8, source, .. } if source.to_string().contains("busy"))
    );
    assert!(failed.to_string().contains("still live"), "{failed}");
    assert!(!buf.is_closed());
    buf.free(&s).unwrap();
    assert!(buf.is_closed());
    drop(buf);
    assert_eq!(
        calls.load(Ordering::Relaxed),
        2,
        "released once more, not on drop too"
    );
}

/// A resource whose `deallocate` fails the first time, then succeeds, and
/// counts every call: a driver that freed the memory and then reported an
/// earlier asynchronous error, so a second call frees the pointer twice.
fn failing_once(
    calls: &Arc<std::sync::atomic::AtomicUsize>,
    addr: usize,
) -> Arc<dyn devmm::MemoryResource> {
    use std::sync::atomic::Ordering;
    let counted = calls.clone();
    let mr = devmm::CallbackMemoryResource::new(
        devmm::Device::CPU,
        1,
        move |_, _| Ok(devmm::DevicePtr::from_addr(addr)),
        move |_, _, _| match counted.fetch_add(1, Ordering::Relaxed) {
            0 => Err(Error::InvalidArgument {
                reason: "an earlier asynchronous error".into(),
            }),
            _ => Ok(()),
        },
    )
    .unwrap();
    Arc::new(mr)
}

/// An explicit `free` that failed leaves the retry to its caller: the drop
/// (no caller to report to) gives the memory up instead of deallocating
/// the same pointer a second time.
#[test]
fn a_drop_after_a_failed_free_does_not_deallocate_again() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let calls = Arc::new(AtomicUsize::new(0));
    let s = Stream::cpu();
    let buf = DeviceBuffer::new(8, failing_once(&calls, 0x5000), &s).unwrap();
    assert!(matches!(buf.free(&s), Err(Error::FreeFailed { .. })));
    drop(buf);
    assert_eq!(
        calls.load(Ordering::Relaxed),
        1,
        "deallocate called again on drop"
    );
}

/// The same after a failed `free`, for the collector's release and then
/// the drop: one deallocate in all.
#[test]
fn a_collector_release_after_a_failed_free_does_not_deallocate_again() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let calls = Arc::new(AtomicUsize::new(0));
    let s = Stream::cpu();
    let buf = DeviceBuffer::new(8, failing_once(&calls, 0x6000), &s).unwrap();
    assert!(buf.free(&s).is_err());
    buf.free_or_log();
    assert!(buf.is_closed(), "the collector's release closes the buffer");
    drop(buf);
    assert_eq!(calls.load(Ordering::Relaxed), 1, "deallocate called again");
}

/// The collector's release (`free_or_log`: a finalizer, a cycle's clear)
/// has no caller to retry a failed free, and a driver may have freed the
/// memory before it reported the error: the buffer gives up the memory
/// then, and neither a second collector call nor the drop deallocates it
/// again.
#[test]
fn a_failed_release_by_the_collector_is_the_only_deallocate() {
    use devmm::{CallbackMemoryResource, Device, DevicePtr};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let mr = CallbackMemoryResource::new(
        Device::CPU,
        1,
        |_, _| Ok(DevicePtr::from_addr(0x3000)),
        move |_, _, _| {
            counted.fetch_add(1, Ordering::Relaxed);
            Err(Error::InvalidArgument {
                reason: "an earlier asynchronous error".into(),
            })
        },
    )
    .unwrap();
    let buf = DeviceBuffer::new(8, Arc::new(mr), &Stream::cpu()).unwrap();
    // A finalizer, then the cycle's clear: both reach `free_or_log`.
    buf.free_or_log();
    assert!(
        buf.is_closed(),
        "the collector's failed release closes the buffer"
    );
    buf.free_or_log();
    drop(buf);
    assert_eq!(
        calls.load(Ordering::Relaxed),
        1,
        "deallocate called more than once"
    );
}

#[test]
fn offset_copies_are_bounds_and_overflow_checked() {
    let buf = DeviceBuffer::on_device(8, devmm::Device::CPU).expect("allocates");
    let stream = devmm::Stream::cpu();
    // SAFETY: the CPU default resource hands out real host memory.
    unsafe { buf.copy_from_host_at(0, b"abcdefgh", &stream) }.expect("fits");
    // SAFETY: as above.
    unsafe { buf.copy_from_host_at(6, b"XY", &stream) }.expect("fits at the end");
    let mut back = [0u8; 3];
    // SAFETY: as above.
    unsafe { buf.copy_to_host_at(5, &mut back, &stream) }.expect("fits");
    assert_eq!(&back, b"fXY");
    for offset in [7, usize::MAX] {
        // SAFETY: refused before any copy.
        let refused = unsafe { buf.copy_from_host_at(offset, b"XY", &stream) };
        assert!(refused.is_err(), "offset {offset}");
    }
}

#[test]
fn adopting_a_null_pointer_is_refused_and_still_released() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static RELEASED: AtomicUsize = AtomicUsize::new(0);
    let mr = devmm::ForeignMemoryResource::new(devmm::Device::CPU, "a test", || {
        RELEASED.fetch_add(1, Ordering::SeqCst);
    });
    let refused = DeviceBuffer::adopt(devmm::DevicePtr::NULL, 16, mr, &devmm::Stream::cpu());
    assert!(matches!(
        refused,
        Err(devmm::Error::Misuse {
            kind: devmm::MisuseKind::NullAllocation,
            ..
        })
    ));
    assert_eq!(RELEASED.load(Ordering::SeqCst), 1);
    let foreign = devmm::ForeignMemoryResource::new(devmm::Device::CPU, "never", || {});
    let allocate = devmm::MemoryResource::allocate(&foreign, 8, &devmm::Stream::cpu());
    assert!(allocate.is_err(), "a foreign resource never allocates");
}
