//! `empty`, `empty_like` and `Tensor` end to end on the CPU.

use std::sync::Arc;

use devmm::mrs::cpu::{HeapMemoryResource, MallocMemoryResource};
use devmm::{
    Aligned, CallbackMemoryResource, ColMajor, DType, Device, DeviceBuffer, DevicePtr,
    EmptyOptions, Error, Layout, MemoryResource, RowMajor, StatisticsAdaptor, Stream, Tensor,
    empty, empty_like, using_memory_resource,
};

#[test]
fn the_seed_readme_figures_hold() {
    let t = empty(
        &[2, 3],
        DType::FLOAT32,
        &EmptyOptions::new().layout(RowMajor),
    )
    .unwrap();
    assert_eq!((t.shape(), t.strides()), (&[2, 3][..], &[3, 1][..]));
    assert_eq!(t.device(), Device::CPU);
    assert_eq!(t.buffer().nbytes(), 24);

    let padded = empty(
        &[4, 3],
        DType::FLOAT32,
        &EmptyOptions::new().layout(Aligned::new(RowMajor, 128, 256).unwrap()),
    )
    .unwrap();
    assert_eq!(padded.strides(), &[32, 1]);
    assert!(padded.data_ptr().is_aligned(256));

    let stats = Arc::new(StatisticsAdaptor::new(MallocMemoryResource::new()));
    let tracked = {
        let _guard = using_memory_resource(stats.clone());
        empty(
            &[256],
            DType::FLOAT32,
            &EmptyOptions::new().layout(RowMajor),
        )
        .unwrap()
    };
    assert_eq!((stats.current_bytes(), stats.peak_bytes()), (1024, 1024));
    tracked.buffer().free(tracked.buffer().stream()).unwrap();
    assert_eq!(stats.current_bytes(), 0);
}

#[test]
fn over_allocates_only_when_the_resource_guarantees_less() {
    let policy = Aligned::new(RowMajor, 64, 1024).unwrap();
    let stats = Arc::new(StatisticsAdaptor::new(HeapMemoryResource::new()));
    let t = empty(
        &[3, 5],
        DType::FLOAT64,
        &EmptyOptions::new()
            .layout(policy.clone())
            .resource(stats.clone()),
    )
    .unwrap();
    let required = t.layout().required_nbytes();
    assert_eq!(required % 1024, 0);
    assert_eq!(
        stats.current_bytes(),
        required + 1024 - 64,
        "slack of base - guaranteed"
    );
    assert!(t.data_ptr().is_aligned(1024));
    assert!(t.byte_offset() < 1024);
    assert!(t.byte_offset() + required <= t.buffer().nbytes());

    let strong = Arc::new(StatisticsAdaptor::new(
        HeapMemoryResource::with_alignment(1024).unwrap(),
    ));
    let u = empty(
        &[3, 5],
        DType::FLOAT64,
        &EmptyOptions::new().layout(policy).resource(strong.clone()),
    )
    .unwrap();
    assert_eq!((strong.current_bytes(), u.byte_offset()), (required, 0));
}

#[test]
fn empty_starts_elements_on_their_natural_alignment_though_dense_layouts_ask_none() {
    // A resource that promises nothing and hands out odd (fake) addresses.
    let odd = Arc::new(
        CallbackMemoryResource::new(
            Device::CPU,
            1,
            |_, _| Ok(DevicePtr::from_addr(0x1001)),
            |_, _, _| Ok(()),
        )
        .unwrap(),
    );
    let t = empty(
        &[3],
        DType::FLOAT64,
        &EmptyOptions::new().layout(RowMajor).resource(odd),
    )
    .unwrap();
    assert_eq!(t.layout().base_alignment(), 1);
    assert_eq!((t.data_ptr().addr(), t.byte_offset()), (0x1008, 7));
}

#[test]
fn zero_size_tensors_have_a_null_data_pointer() {
    let t = empty(&[0, 4], DType::INT16, &EmptyOptions::new()).unwrap();
    assert!(t.data_ptr().is_null());
    assert_eq!((t.numel(), t.strides()), (0, &[4, 1][..]));
}

#[test]
fn empty_like_copies_shape_dtype_and_device() {
    let a = empty(&[2, 2], DType::INT32, &EmptyOptions::new().layout(ColMajor)).unwrap();
    let b = empty_like(&a, &EmptyOptions::new()).unwrap();
    assert_eq!(
        (b.shape(), b.dtype(), b.device()),
        (a.shape(), a.dtype(), a.device())
    );
    assert_eq!(
        b.strides(),
        &[1, 2],
        "without a layout option the source's memory order is kept"
    );
    assert_ne!(a.data_ptr(), b.data_ptr());
}

#[test]
fn bad_requests_are_typed_errors() {
    let err = empty(&[usize::MAX, 3], DType::FLOAT32, &EmptyOptions::new()).unwrap_err();
    assert!(matches!(err, Error::InvalidLayout { .. }), "{err:?}");
    let mismatch = empty(
        &[1],
        DType::UINT8,
        &EmptyOptions::new()
            .device(Device::cuda(0))
            .resource(Arc::new(MallocMemoryResource::new())),
    )
    .unwrap_err();
    assert!(
        mismatch.to_string().contains("mr lives on cpu:0"),
        "{mismatch}"
    );
    let limited = Arc::new(devmm::LimitingAdaptor::new(MallocMemoryResource::new(), 16));
    let oom = empty(&[5], DType::FLOAT32, &EmptyOptions::new().resource(limited)).unwrap_err();
    assert!(
        matches!(oom, Error::LimitExceeded { nbytes: 20, .. }),
        "{oom:?}"
    );
}

#[test]
fn tensors_over_hand_built_layouts_are_checked() {
    let mr: Arc<dyn MemoryResource> = Arc::new(HeapMemoryResource::new());
    let buffer = Arc::new(DeviceBuffer::new(64, mr, &Stream::cpu()).unwrap());
    let layout = Layout::new(&[2, 3], &[4, 1], DType::FLOAT32, 4).unwrap();
    let t = Tensor::from_buffer(buffer.clone(), DType::FLOAT32, layout.clone(), 16).unwrap();
    assert_eq!(t.data_ptr().addr(), buffer.ptr().addr() + 16);
    assert!(!t.is_read_only() && t.to_read_only().is_read_only());
    let too_far =
        Tensor::from_buffer(buffer.clone(), DType::FLOAT32, layout.clone(), 48).unwrap_err();
    assert!(
        too_far.to_string().contains("the buffer has 64"),
        "{too_far}"
    );
    let misaligned =
        Tensor::from_buffer(buffer.clone(), DType::FLOAT32, layout.clone(), 2).unwrap_err();
    assert!(
        misaligned.to_string().contains("not aligned"),
        "{misaligned}"
    );
    let wrong_dtype = Tensor::from_buffer(buffer, DType::FLOAT64, layout, 0).unwrap_err();
    assert!(
        wrong_dtype.to_string().contains("4-byte elements"),
        "{wrong_dtype}"
    );
}

#[test]
fn tensors_share_and_keep_their_buffer() {
    let stats = Arc::new(StatisticsAdaptor::new(HeapMemoryResource::new()));
    let t = empty(
        &[8],
        DType::UINT8,
        &EmptyOptions::new().resource(stats.clone()),
    )
    .unwrap();
    let view = t.to_read_only();
    drop(t);
    assert_eq!(
        stats.current_bytes(),
        8,
        "the read-only view still holds the buffer"
    );
    drop(view);
    assert_eq!(stats.current_bytes(), 0);
}

#[test]
fn empty_like_keeps_the_memory_order_unless_a_layout_is_given() {
    let nhwc = devmm::Permuted::new([0, 2, 3, 1]);
    let a = devmm::empty(
        &[1, 3, 4, 5],
        devmm::DType::UINT8,
        &devmm::EmptyOptions::new().layout(nhwc),
    )
    .expect("allocates");
    let like = devmm::empty_like(&a, &devmm::EmptyOptions::new()).expect("allocates");
    assert_eq!(like.strides(), a.strides());
    let row = devmm::empty_like(&a, &devmm::EmptyOptions::new().layout(devmm::RowMajor))
        .expect("allocates");
    assert_eq!(row.strides(), &[60, 20, 5, 1]);
}

#[test]
fn empty_like_keeps_the_device_unless_a_device_or_resource_is_named() {
    let order = Some(devmm::Permuted::new([1, 0]));
    let (named_mr, kept) = EmptyOptions::new()
        .resource(Arc::new(MallocMemoryResource::new()))
        .imitating(Device::cuda(0), order.clone());
    // The resource decides the device; the order is still kept.
    assert_eq!(
        (named_mr.target_device().unwrap(), kept),
        (Device::CPU, order.clone())
    );
    let (named_device, _) = EmptyOptions::new()
        .device(Device::CPU)
        .imitating(Device::cuda(0), None);
    assert_eq!(named_device.target_device().unwrap(), Device::CPU);
    let (neither, kept) = EmptyOptions::new().imitating(Device::cuda(0), None);
    assert_eq!(
        (neither.target_device().unwrap(), kept),
        (Device::cuda(0), None)
    );
    let a = empty(&[2, 3], DType::INT8, &EmptyOptions::new().layout(ColMajor)).unwrap();
    assert_eq!(a.memory_order(), order);
    let row = empty(&[2, 3], DType::INT8, &EmptyOptions::new()).unwrap();
    assert_eq!(row.memory_order(), None);
}

/// `view_of` checks the layout against the shape and dtype, the offset in
/// elements for overflow, and the rest as `from_buffer` does.
#[test]
fn view_of_checks_layout_offset_and_fit() {
    let buf = Arc::new(
        DeviceBuffer::new(64, Arc::new(HeapMemoryResource::new()), &Stream::cpu()).unwrap(),
    );
    let layout = Layout::new(&[2, 2], &[2, 1], DType::FLOAT32, 4).unwrap();
    let t = Tensor::view_of(buf.clone(), DType::FLOAT32, &[2, 2], layout.clone(), 3).unwrap();
    assert_eq!(
        (t.byte_offset(), t.offset(), t.shape()),
        (12, Some(3), &[2, 2][..])
    );
    assert_eq!(t.checked_offset().unwrap(), 3);
    // Three-lane float32 elements, 12 bytes, from byte 16: no whole offset.
    let vec3 = DType::new(devmm::DTypeCode::Float, 32, 3).unwrap();
    let vec3_layout = Layout::new(&[2], &[1], vec3, 4).unwrap();
    let partial = Tensor::from_buffer(buf.clone(), vec3, vec3_layout, 16).unwrap();
    let refused = partial.checked_offset().unwrap_err();
    assert!(matches!(refused, Error::Refused { .. }), "{refused:?}");
    assert_eq!(
        refused.to_string(),
        "the first element is 16 bytes in, not a whole number of 12-byte elements; read byte_offset"
    );
    assert!(matches!(
        Tensor::view_of(buf.clone(), DType::FLOAT32, &[4], layout.clone(), 0),
        Err(Error::InvalidLayout { .. })
    ));
    assert!(Tensor::view_of(buf.clone(), DType::FLOAT64, &[2, 2], layout.clone(), 0).is_err());
    let Err(Error::Refused { reason }) = Tensor::view_of(
        buf.clone(),
        DType::FLOAT32,
        &[2, 2],
        layout.clone(),
        usize::MAX,
    ) else {
        panic!("an offset whose bytes overflow is refused")
    };
    assert_eq!(
        reason,
        format!(
            "offset must be an element count from 0 to 16 (the 64-byte buffer holds 16 float32); \
             {} is out of range",
            usize::MAX
        )
    );
    // Past the end: `from_buffer`'s refusal.
    assert!(Tensor::view_of(buf, DType::FLOAT32, &[2, 2], layout, 13).is_err());
}

/// The binding's `repr` is the tensor's `Display`: the shape as a Python
/// tuple (a 1-tuple has its comma), read-only and the offset as set.
#[test]
fn a_tensor_displays_as_the_seed_repr() {
    let t = empty(&[2, 3], DType::FLOAT32, &EmptyOptions::new()).unwrap();
    assert_eq!(
        t.to_string(),
        "Tensor(shape=(2, 3), dtype=float32, device=cpu:0, offset=0, read_only=False)"
    );
    let scalar = empty(&[], DType::UINT8, &EmptyOptions::new())
        .unwrap()
        .to_read_only();
    assert_eq!(
        scalar.to_string(),
        "Tensor(shape=(), dtype=uint8, device=cpu:0, offset=0, read_only=True)"
    );
    let buf = Arc::new(
        DeviceBuffer::new(64, Arc::new(HeapMemoryResource::new()), &Stream::cpu()).unwrap(),
    );
    let layout = Layout::new(&[4], &[1], DType::UINT16, 2).unwrap();
    let t = Tensor::view_of(buf, DType::UINT16, &[4], layout, 5).unwrap();
    assert_eq!(
        t.to_string(),
        "Tensor(shape=(4,), dtype=uint16, device=cpu:0, offset=5, read_only=False)"
    );
}
