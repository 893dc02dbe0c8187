//! Properties every layout policy keeps, over random shapes and dtypes.

use std::sync::Arc;

use devmm::{
    Aligned, ColMajor, DType, DTypeCode, Device, DeviceOptimal, Error, Layout, LayoutPlan,
    LayoutPolicy, Permuted, RowMajor,
};
use proptest::prelude::*;

fn dtype() -> impl Strategy<Value = DType> {
    proptest::sample::select(DType::STANDARD.to_vec())
}

fn device() -> impl Strategy<Value = Device> {
    prop_oneof![
        Just(Device::CPU),
        Just(Device::cuda(0)),
        Just(Device::rocm(1))
    ]
}

fn shape() -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(0usize..9, 0..5)
}

fn power_of_two() -> impl Strategy<Value = usize> {
    (0u32..10).prop_map(|e| 1usize << e)
}

/// A policy of every shipped kind, for a shape of `ndim` dimensions.
fn policy(ndim: usize) -> impl Strategy<Value = Arc<dyn LayoutPolicy>> {
    let permuted = Just((0..ndim).collect::<Vec<_>>())
        .prop_shuffle()
        .prop_map(|order| Arc::new(Permuted::new(order)) as Arc<dyn LayoutPolicy>);
    let base = prop_oneof![
        Just(Arc::new(RowMajor) as Arc<dyn LayoutPolicy>),
        Just(Arc::new(ColMajor) as Arc<dyn LayoutPolicy>),
        Just(Arc::new(DeviceOptimal) as Arc<dyn LayoutPolicy>),
        permuted,
    ];
    (base, power_of_two(), power_of_two(), any::<bool>()).prop_map(|(inner, unit, align, wrap)| {
        if wrap {
            Arc::new(Aligned::over(inner, unit.max(16), align).unwrap()) as Arc<dyn LayoutPolicy>
        } else {
            inner
        }
    })
}

/// Any dtype, not only the standard ones: odd bit widths (24 bits: 3-byte
/// items with a 4-byte alignment), vector lanes, and packed sub-byte
/// scalars, which no layout accepts.
fn any_dtype() -> impl Strategy<Value = DType> {
    let code = proptest::sample::select(vec![
        DTypeCode::UInt,
        DTypeCode::Float,
        DTypeCode::Complex,
        DTypeCode::Float4E2M1Fn,
    ]);
    (code, 1u8..=128, 1u16..5)
        .prop_map(|(code, bits, lanes)| DType::new(code, bits, lanes).unwrap())
}

/// A policy that plans as `inner` does but that [`Layout::resolve`] cannot
/// recognise, so it always takes the general path: plan, then the rule.
#[derive(Debug)]
struct GeneralPath(Arc<dyn LayoutPolicy>);

impl LayoutPolicy for GeneralPath {
    fn plan(&self, shape: &[usize], dtype: DType, device: Device) -> Result<LayoutPlan, Error> {
        self.0.plan(shape, dtype, device)
    }

    fn base_alignment(&self) -> usize {
        self.0.base_alignment()
    }

    fn unit_stride_alignment(&self) -> usize {
        self.0.unit_stride_alignment()
    }
}

proptest! {
    #[test]
    fn strides_are_a_permutation_derived_non_overlapping_set(
        (shape, policy) in shape().prop_flat_map(|s| { let n = s.len(); (Just(s), policy(n)) }),
        dtype in dtype(),
        device in device(),
    ) {
        let layout = Layout::resolve(&policy, &shape, dtype, device).unwrap();
        prop_assert_eq!(layout.shape(), &shape[..]);
        prop_assert!(layout.strides().iter().all(|&s| s > 0), "positive strides {:?}", layout.strides());
        let mut order = layout.permutation().to_vec();
        order.sort_unstable();
        prop_assert_eq!(order, (0..shape.len()).collect::<Vec<_>>());
        // Walking inside-out, each stride is the inner stride times the inner
        // (possibly padded) extent: never smaller, so no two elements overlap.
        let perm = layout.permutation();
        for pair in perm.windows(2) {
            let (outer, inner) = (pair[0], pair[1]);
            prop_assert!(layout.strides()[outer] >= layout.strides()[inner] * shape[inner].max(1));
        }
        layout.validate().unwrap();
    }

    #[test]
    fn a_hand_built_layout_that_validates_has_no_two_elements_at_one_address(
        dims in proptest::collection::vec((1usize..4, 1usize..9), 1..5),
    ) {
        let (shape, strides): (Vec<usize>, Vec<usize>) = dims.into_iter().unzip();
        if let Ok(layout) = Layout::new(&shape, &strides, DType::UINT8, 1) {
            let mut offsets = vec![0usize];
            for (&extent, &stride) in shape.iter().zip(layout.strides()) {
                offsets = offsets
                    .iter()
                    .flat_map(|&o| (0..extent).map(move |i| o + i * stride))
                    .collect();
            }
            let count = offsets.len();
            offsets.sort_unstable();
            offsets.dedup();
            prop_assert_eq!(offsets.len(), count, "{:?} / {:?} overlaps", shape, strides);
        }
    }

    #[test]
    fn required_bytes_cover_the_last_element_and_respect_alignment(
        (shape, policy) in shape().prop_flat_map(|s| { let n = s.len(); (Just(s), policy(n)) }),
        dtype in dtype(),
        device in device(),
    ) {
        let layout = Layout::resolve(&policy, &shape, dtype, device).unwrap();
        if shape.contains(&0) {
            prop_assert_eq!(layout.required_nbytes(), 0);
        } else {
            let last: usize = shape.iter().zip(layout.strides()).map(|(&e, &s)| s * (e - 1)).sum();
            prop_assert!(layout.required_nbytes() >= (last + 1) * dtype.itemsize());
            prop_assert!(layout.required_nbytes() < (last + 1) * dtype.itemsize() + layout.base_alignment());
        }
        prop_assert!(layout.base_alignment().is_power_of_two());
        prop_assert_eq!(layout.required_nbytes() % layout.base_alignment(), 0);
        // The policy's declared alignments bound every plan it makes.
        let plan = policy.plan(&shape, dtype, device).unwrap();
        prop_assert_eq!(layout.base_alignment(), plan.base_alignment);
        prop_assert!(plan.base_alignment <= policy.base_alignment());
        prop_assert!(plan.unit_stride_alignment <= policy.unit_stride_alignment());
    }

    #[test]
    fn aligned_rows_start_on_the_unit_stride_alignment(
        shape in proptest::collection::vec(1usize..9, 1..4),
        unit in (2u32..9).prop_map(|e| 1usize << e),
        dtype in proptest::sample::select(vec![DType::INT8, DType::FLOAT16, DType::FLOAT32, DType::FLOAT64, DType::COMPLEX128]),
    ) {
        let policy: Arc<dyn LayoutPolicy> = Arc::new(Aligned::new(RowMajor, unit.max(dtype.itemsize()), 1).unwrap());
        let layout = Layout::resolve(&policy, &shape, dtype, Device::CPU).unwrap();
        let unit = unit.max(dtype.itemsize());
        for (dim, &stride) in layout.strides().iter().enumerate().take(shape.len() - 1) {
            prop_assert_eq!(stride * dtype.itemsize() % unit, 0, "dim {}", dim);
        }
        prop_assert_eq!(layout.strides()[shape.len() - 1], 1);
    }

    #[test]
    fn row_and_col_major_are_dense(shape in proptest::collection::vec(1usize..7, 0..5), dtype in dtype()) {
        let row = RowMajor.layout(&shape, dtype, Device::CPU).unwrap();
        let col = ColMajor.layout(&shape, dtype, Device::CPU).unwrap();
        let numel: usize = shape.iter().product();
        prop_assert_eq!(row.required_nbytes(), numel * dtype.itemsize());
        prop_assert_eq!(col.required_nbytes(), numel * dtype.itemsize());
        prop_assert!(row.is_c_contiguous());
        let reversed: Vec<usize> = row.strides().iter().rev().copied().collect();
        let col_of_reversed = ColMajor.layout(&shape.iter().rev().copied().collect::<Vec<_>>(), dtype, Device::CPU).unwrap();
        prop_assert_eq!(col_of_reversed.strides(), &reversed[..]);
    }

    #[test]
    fn overflowing_shapes_are_errors_not_panics(
        // Above half the address space, so that with another dimension of
        // at least 2 the element count itself overflows, whatever the
        // dtype: `usize::MAX / 4` let `[2^62 - 1, 2]` of bool (2^63 - 2
        // bytes) through, which is a valid layout.
        big in (usize::MAX / 2 + 1)..=usize::MAX,
        rest in proptest::collection::vec(2usize..1000, 1..3),
        dtype in dtype(),
    ) {
        let mut shape = vec![big];
        shape.extend(rest);
        for policy in [Arc::new(RowMajor) as Arc<dyn LayoutPolicy>, Arc::new(ColMajor), Arc::new(DeviceOptimal)] {
            let result = Layout::resolve(&policy, &shape, dtype, Device::CPU);
            prop_assert!(matches!(result, Err(Error::InvalidLayout { .. })), "{:?}", result);
        }
    }

    #[test]
    fn the_fast_path_agrees_with_the_general_path(
        shape in proptest::collection::vec(prop_oneof![0usize..9, Just(usize::MAX / 3), Just(usize::MAX)], 0..6),
        dtype in any_dtype(),
        device in device(),
        // Permuted orders of any length and content: valid ones, wrong
        // lengths and repeats, which both paths must refuse alike.
        order in proptest::collection::vec(0usize..6, 0..6),
        shuffled in Just((0..6).collect::<Vec<usize>>()).prop_shuffle(),
    ) {
        let ndim = shape.len();
        let valid: Vec<usize> = shuffled.into_iter().filter(|&d| d < ndim).collect();
        let policies = [
            Arc::new(RowMajor) as Arc<dyn LayoutPolicy>,
            Arc::new(ColMajor),
            Arc::new(Permuted::new(valid)),
            Arc::new(Permuted::new(order)),
            Arc::new(DeviceOptimal),
        ];
        for policy in policies {
            let fast = Layout::resolve(&policy, &shape, dtype, device);
            let general = Layout::resolve(&(Arc::new(GeneralPath(Arc::clone(&policy))) as Arc<dyn LayoutPolicy>), &shape, dtype, device);
            match (fast, general) {
                (Ok(fast), Ok(general)) => {
                    prop_assert_eq!(&fast, &general, "{:?}", policy);
                    prop_assert_eq!(fast.permutation(), general.permutation());
                    prop_assert_eq!(fast.itemsize(), general.itemsize());
                    prop_assert!(Arc::ptr_eq(fast.policy().unwrap(), &policy));
                }
                (Err(fast), Err(general)) => prop_assert_eq!(fast.to_string(), general.to_string()),
                (fast, general) => prop_assert!(false, "{:?}: fast {:?}, general {:?}", policy, fast, general),
            }
        }
    }

    #[test]
    fn hand_built_layouts_agree_with_resolved_ones(
        (shape, policy) in shape().prop_flat_map(|s| { let n = s.len(); (Just(s), policy(n)) }),
        dtype in dtype(),
    ) {
        let resolved = Layout::resolve(&policy, &shape, dtype, Device::CPU).unwrap();
        let rebuilt = Layout::new(&shape, resolved.strides(), dtype, resolved.base_alignment()).unwrap();
        prop_assert_eq!(rebuilt.required_nbytes(), resolved.required_nbytes());
        prop_assert!(rebuilt.policy().is_none());
    }
}

#[test]
fn the_seed_figures_hold() {
    let f32 = DType::FLOAT32;
    assert_eq!(
        RowMajor
            .layout(&[2, 3], f32, Device::CPU)
            .unwrap()
            .strides(),
        &[3, 1]
    );
    assert_eq!(
        ColMajor
            .layout(&[2, 3], f32, Device::CPU)
            .unwrap()
            .strides(),
        &[1, 2]
    );
    let aligned = Aligned::new(RowMajor, 128, 256)
        .unwrap()
        .layout(&[4, 3], f32, Device::CPU)
        .unwrap();
    assert_eq!(aligned.strides(), &[32, 1]);
    assert_eq!(aligned.required_nbytes(), 512); // (1 + 32·3 + 2)·4 = 396 → 512
    assert_eq!(aligned.base_alignment(), 256);
    // The seed's dense policies ask no base alignment.
    assert_eq!(
        RowMajor
            .layout(&[2, 3], DType::FLOAT64, Device::CPU)
            .unwrap()
            .base_alignment(),
        1
    );
    // Nested wrappers: the inner order, the outermost alignments.
    let nested = Aligned::new(Aligned::new(ColMajor, 48, 512).unwrap(), 32, 64).unwrap();
    let layout = nested.layout(&[3, 2], DType::UINT8, Device::CPU).unwrap();
    assert_eq!(
        (layout.strides(), layout.base_alignment()),
        (&[1, 32][..], 64)
    );
    assert_eq!(
        (nested.base_alignment(), nested.unit_stride_alignment()),
        (64, 32)
    );
    let optimal: &dyn LayoutPolicy = &DeviceOptimal;
    assert_eq!(
        (optimal.base_alignment(), optimal.unit_stride_alignment()),
        (256, 128)
    );
}

#[test]
fn zero_extents_need_zero_bytes_and_keep_positive_strides() {
    let layout = RowMajor
        .layout(&[0, 3], DType::FLOAT32, Device::CPU)
        .unwrap();
    assert_eq!(
        (layout.required_nbytes(), layout.strides()),
        (0, &[3, 1][..])
    );
    let huge_but_empty = RowMajor
        .layout(&[0, usize::MAX / 8], DType::UINT8, Device::CPU)
        .unwrap();
    assert_eq!(
        (huge_but_empty.numel(), huge_but_empty.required_nbytes()),
        (0, 0)
    );
    let scalar = RowMajor.layout(&[], DType::FLOAT64, Device::CPU).unwrap();
    assert_eq!((scalar.required_nbytes(), scalar.numel()), (8, 1));
}

#[test]
fn invalid_policies_and_hand_built_layouts_say_what_to_fix() {
    let cases: Vec<(Result<Layout, Error>, &str)> = vec![
        (
            Permuted::new([0, 0]).layout(&[2, 2], DType::UINT8, Device::CPU),
            "not a permutation",
        ),
        (
            Permuted::new([0]).layout(&[2, 2], DType::UINT8, Device::CPU),
            "one entry per dimension",
        ),
        (
            Aligned::new(RowMajor, 0, 64).and_then(|a| a.layout(&[2], DType::FLOAT32, Device::CPU)),
            "unit_stride_alignment must be a positive byte count",
        ),
        (Layout::new(&[2, 3], &[2, 1], DType::FLOAT32, 4), "overlaps"),
        // Each stride steps past the others' span: (0, 1, 1) and (1, 0, 0)
        // are both 3 elements in.
        (
            Layout::new(&[2, 2, 2], &[3, 2, 1], DType::FLOAT32, 4),
            "stride 3 of dimension 0 overlaps the 4 elements",
        ),
        (
            Layout::new(&[2, 3], &[3, 0], DType::FLOAT32, 4),
            "must be positive",
        ),
        (
            Layout::new(&[2, 3], &[3], DType::FLOAT32, 4),
            "one stride per dimension",
        ),
        (Layout::new(&[2], &[1], DType::FLOAT32, 3), "power of two"),
    ];
    for (result, needle) in cases {
        let err = result.unwrap_err();
        assert!(matches!(err, Error::InvalidLayout { .. }), "{err:?}");
        assert!(err.to_string().contains(needle), "{err} lacks {needle:?}");
    }
    assert!(
        Aligned::new(RowMajor, 64, 96)
            .unwrap_err()
            .to_string()
            .contains("base_alignment must be a power of two")
    );
    // Any positive unit stride is accepted (the seed's rule): 96-byte rows.
    let rows96 = Aligned::new(RowMajor, 96, 64)
        .unwrap()
        .layout(&[2, 3], DType::FLOAT32, Device::CPU)
        .unwrap();
    assert_eq!(rows96.strides(), &[24, 1]);
}
