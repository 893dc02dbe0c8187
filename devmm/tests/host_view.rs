//! Typed host views: checked against dtype, device, layout and sharing.

use std::mem::MaybeUninit;
use std::sync::Arc;

use devmm::dlpack::DlpackRequest;
use devmm::testing::RecordingMemoryResource;
use devmm::{
    ArrayInterfaceKind, ColMajor, DType, EmptyOptions, Error, HeapMemoryResource,
    MallocMemoryResource, StatisticsAdaptor, Stream, empty,
};

#[test]
fn write_then_read_through_the_views() {
    let mut t = empty(&[3, 2], DType::FLOAT64, &EmptyOptions::new()).expect("allocates");
    for (i, slot) in t
        .as_mut_slice::<f64>()
        .expect("sole handle")
        .iter_mut()
        .enumerate()
    {
        slot.write(i as f64 / 2.0);
    }
    // SAFETY: every element written above, no other writer.
    let values = unsafe { t.as_slice::<f64>() }.expect("a view");
    assert_eq!(&*values, &[0.0, 0.5, 1.0, 1.5, 2.0, 2.5]);
    assert_eq!(values.as_ptr() as usize, t.data_ptr().addr());
}

#[test]
fn the_views_refuse_what_they_cannot_show_soundly() {
    let mut t = empty(&[4], DType::INT32, &EmptyOptions::new()).expect("allocates");
    // SAFETY: refused before any read.
    let refused = unsafe { t.as_slice::<u32>() };
    assert!(matches!(refused, Err(Error::InvalidArgument { .. })));
    drop(refused);
    let clone = t.clone();
    assert!(
        t.as_mut_slice::<i32>().is_err(),
        "a clone shares the memory"
    );
    drop(clone);
    let export = t.to_dlpack(&DlpackRequest::new()).expect("exports");
    assert!(
        t.as_mut_slice::<i32>().is_err(),
        "a consumer may be writing"
    );
    drop(export);
    assert_eq!(t.as_mut_slice::<i32>().expect("sole again").len(), 4);
    let mut ro = t.to_read_only();
    drop(t);
    assert!(ro.as_mut_slice::<i32>().is_err(), "read-only");

    let f = empty(&[2, 3], DType::INT32, &EmptyOptions::new().layout(ColMajor)).expect("allocates");
    // SAFETY: refused before any read.
    let refused = unsafe { f.as_slice::<i32>() };
    assert!(matches!(refused, Err(Error::InvalidLayout { .. })));
}

#[test]
fn zero_size_views_are_empty_slices() {
    let opts = EmptyOptions::new().resource(Arc::new(HeapMemoryResource::new()));
    let mut t = empty(&[0, 5], DType::UINT8, &opts).expect("allocates");
    assert!(t.as_mut_slice::<u8>().expect("a view").is_empty());
    // SAFETY: nothing to initialise.
    assert!(unsafe { t.as_slice::<u8>() }.expect("a view").is_empty());
}

#[test]
fn the_views_refuse_a_freed_buffer() {
    let mut t = empty(&[4], DType::INT32, &EmptyOptions::new()).expect("allocates");
    t.buffer().free(&Stream::cpu()).expect("frees");
    assert!(matches!(
        t.as_mut_slice::<i32>(),
        Err(Error::BufferClosed { .. })
    ));
    // SAFETY: refused before any read.
    let refused = unsafe { t.as_slice::<i32>() };
    assert!(matches!(refused, Err(Error::BufferClosed { .. })));
}

#[test]
fn a_live_view_defers_free_until_it_drops() {
    let stats = Arc::new(StatisticsAdaptor::new(MallocMemoryResource::new()));
    let opts = EmptyOptions::new().resource(stats.clone());
    let mut t = empty(&[4], DType::INT32, &opts).expect("allocates");
    t.as_mut_slice::<i32>()
        .expect("sole handle")
        .fill(MaybeUninit::new(7));
    // SAFETY: every element written above, no other writer.
    let view = unsafe { t.as_slice::<i32>() }.expect("a view");
    t.buffer().free(&Stream::cpu()).expect("frees");
    assert!(t.buffer().is_closed());
    assert_eq!(stats.current_bytes(), 16, "the view still reads the memory");
    assert_eq!(&*view, &[7, 7, 7, 7]);
    drop(view);
    assert_eq!(stats.current_bytes(), 0, "released once the view dropped");
}

#[test]
fn the_views_refuse_memory_the_host_cannot_dereference() {
    let opts = EmptyOptions::new().resource(Arc::new(RecordingMemoryResource::new()));
    let mut t = empty(&[4], DType::INT32, &opts).expect("allocates");
    assert!(matches!(
        t.as_mut_slice::<i32>(),
        Err(Error::NotDereferenceable { .. })
    ));
    // SAFETY: refused before any read.
    let refused = unsafe { t.as_slice::<i32>() };
    assert!(matches!(refused, Err(Error::NotDereferenceable { .. })));
}

#[test]
fn array_interfaces_refuse_a_freed_buffer() {
    let t = empty(&[4], DType::INT32, &EmptyOptions::new()).expect("allocates");
    assert!(t.array_interface(ArrayInterfaceKind::Host).is_ok());
    t.buffer().free(&Stream::cpu()).expect("frees");
    assert!(matches!(
        t.array_interface(ArrayInterfaceKind::Host),
        Err(Error::BufferClosed { .. })
    ));
}
