//! `Tensor::to` on the CPU: copies of padded, permuted and strided tensors
//! element for element, the resource they come from, and the refusals.

mod support;

use std::sync::Arc;

use devmm::mrs::cpu::MallocMemoryResource;
use devmm::{
    Aligned, ColMajor, DType, Device, DeviceBuffer, DeviceType, EmptyOptions, Error, Layout,
    LayoutPolicy, Permuted, RowMajor, StatisticsAdaptor, Tensor, empty, using_memory_resource,
};
use support::strided::{expected, fill, values};

fn tensor(shape: &[usize], policy: impl LayoutPolicy) -> Tensor {
    let t = empty(shape, DType::UINT32, &EmptyOptions::new().layout(policy)).unwrap();
    fill(&t);
    t
}

fn layout(shape: &[usize], policy: impl LayoutPolicy + Clone) -> Layout {
    policy.layout(shape, DType::UINT32, Device::CPU).unwrap()
}

#[test]
fn a_padded_source_copies_into_its_own_layout_and_dense_ones() {
    let shape = [3, 5];
    let src = tensor(&shape, Aligned::new(RowMajor, 64, 64).unwrap());
    assert_eq!(src.strides(), &[16, 1], "rows padded to 64 bytes");
    let kept = src.to(Device::CPU, None, None).unwrap();
    assert_eq!(
        (kept.strides(), values(&kept)),
        (&[16, 1][..], expected(15))
    );
    assert_ne!(kept.data_ptr(), src.data_ptr());
    for dense in [layout(&shape, RowMajor), layout(&shape, ColMajor)] {
        let copy = src.to(Device::CPU, None, Some(dense.clone())).unwrap();
        assert_eq!(copy.layout(), &dense);
        assert_eq!(values(&copy), expected(15), "into {:?}", dense.strides());
    }
}

#[test]
fn a_permuted_source_copies_element_by_element_into_another_order() {
    let shape = [2, 3, 4];
    let src = tensor(&shape, Permuted::new([2, 0, 1]));
    assert_eq!(src.strides(), &[3, 1, 6]);
    let targets = [
        None,
        Some(layout(&shape, RowMajor)),
        Some(layout(&shape, Permuted::new([1, 2, 0]))),
        Some(layout(&shape, Aligned::new(ColMajor, 32, 64).unwrap())),
    ];
    for target in targets {
        let copy = src.to(Device::CPU, None, target.clone()).unwrap();
        let strides = target.as_ref().map_or(src.strides(), |l| l.strides());
        assert_eq!(copy.strides(), strides);
        assert_eq!(values(&copy), expected(24), "into {strides:?}");
    }
}

#[test]
fn a_strided_view_at_an_offset_copies_only_its_elements() {
    let buffer = Arc::new(DeviceBuffer::on_device(64 * 4, Device::CPU).unwrap());
    let every_third = Layout::new(&[3, 2], &[8, 3], DType::UINT32, 4).unwrap();
    let view = Tensor::view_of(buffer, DType::UINT32, &[3, 2], every_third, 5).unwrap();
    fill(&view);
    let copy = view
        .to(Device::CPU, None, Some(layout(&[3, 2], RowMajor)))
        .unwrap();
    assert_eq!((copy.byte_offset(), values(&copy)), (0, expected(6)));
    let kept = view.to(Device::CPU, None, None).unwrap();
    assert_eq!((kept.strides(), values(&kept)), (&[8, 3][..], expected(6)));
}

#[test]
fn a_read_only_source_gives_a_writable_copy() {
    let src = tensor(&[4], RowMajor).to_read_only();
    let mut copy = src.to(Device::CPU, None, None).unwrap();
    assert!(!copy.is_read_only());
    copy.as_mut_slice::<u32>().unwrap()[0].write(99);
    assert_eq!(values(&copy), [99, 8, 15, 22]);
    assert_eq!(values(&src), expected(4), "the source is untouched");
}

#[test]
fn the_copy_comes_from_the_current_resource_and_a_freed_source_allocates_nothing() {
    let src = tensor(&[2, 2], RowMajor);
    let stats = Arc::new(StatisticsAdaptor::new(MallocMemoryResource::new()));
    let _scope = using_memory_resource(stats.clone());
    let copy = src.to(Device::CPU, None, None).unwrap();
    assert_eq!((stats.total_bytes(), stats.current_bytes()), (16, 16));
    assert_eq!(values(&copy), expected(4));
    drop(copy);
    src.buffer().free(src.buffer().stream()).unwrap();
    let refused = src.to(Device::CPU, None, None).unwrap_err();
    assert!(matches!(refused, Error::BufferClosed { .. }), "{refused:?}");
    assert_eq!(
        stats.total_bytes(),
        16,
        "nothing allocated for a freed source"
    );
}

#[test]
fn zero_size_tensors_copy_to_zero_size_tensors() {
    let src = empty(&[0, 3], DType::UINT32, &EmptyOptions::new()).unwrap();
    let copy = src.to(Device::CPU, None, None).unwrap();
    assert_eq!((copy.shape(), copy.numel()), (&[0, 3][..], 0));
}

#[test]
fn a_layout_for_another_shape_is_refused() {
    let src = tensor(&[2, 3], RowMajor);
    let err = src
        .to(Device::CPU, None, Some(layout(&[3, 2], RowMajor)))
        .unwrap_err();
    assert!(matches!(err, Error::InvalidLayout { .. }), "{err:?}");
}

#[test]
fn a_device_devmm_cannot_copy_to_is_named_with_the_source() {
    let src = tensor(&[2], RowMajor);
    let pinned = Device::new(DeviceType::CudaHost, 0);
    let err = src.to(pinned, None, None).unwrap_err();
    let Error::CannotCopy { from, to, .. } = &err else {
        panic!("expected CannotCopy, got {err:?}");
    };
    assert_eq!((*from, *to), (Device::CPU, pinned));
    let text = err.to_string();
    assert!(
        text.starts_with(&format!("cannot copy a tensor from cpu:0 to {pinned}: ")),
        "{text}"
    );
    assert!(
        text.contains("import the data into one of those first"),
        "{text}"
    );
}
