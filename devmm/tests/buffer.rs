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
    buf.copy_from_host(b"abcde").unwrap();
    let mut back = [0u8; 5];
    buf.copy_to_host(&mut back).unwrap();
    assert_eq!(&back, b"abcde");
    let too_long = buf.copy_from_host(b"abcdef").unwrap_err();
    assert!(
        too_long
            .to_string()
            .contains("does not fit a buffer of 5 bytes"),
        "{too_long}"
    );
    buf.free(buf.stream()).unwrap();
    assert!(matches!(
        buf.copy_to_host(&mut back),
        Err(Error::BufferClosed { nbytes: 5, .. })
    ));
}

#[test]
fn zero_byte_buffers_are_legal() {
    let mr = heap();
    let buf = DeviceBuffer::new(0, mr.clone(), &Stream::cpu()).unwrap();
    assert!(buf.ptr().is_null());
    buf.copy_from_host(&[]).unwrap();
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
