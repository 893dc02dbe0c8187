//! `layout!` and `StaticLayout` agree with the run-time policies: the same
//! shape, dtype and policy give the same strides, sizes and alignment,
//! whether resolved by the `const fn` (as `layout!` does at compile time)
//! or by `LayoutPolicy::layout`.

use devmm::{
    Aligned, ColMajor, DType, Device, Element, Layout, LayoutPolicy, LayoutRuleError, Permuted,
    RowMajor, StaticLayout, StaticPlan, layout,
};
use proptest::prelude::*;

const IMAGE: StaticLayout<2> = layout!(
    f32,
    [480, 641],
    aligned(row_major, unit_stride = 128, base = 256)
);

#[test]
fn layout_macro_matches_the_runtime_policies() {
    let policy = Aligned::new(RowMajor, 128, 256).unwrap();
    assert_eq!(
        Layout::from(IMAGE),
        policy
            .layout(&[480, 641], DType::FLOAT32, Device::CPU)
            .unwrap()
    );
    assert_eq!(IMAGE.strides(), &[672, 1]);
    assert_eq!(IMAGE.base_alignment(), 256);
    assert_eq!(
        IMAGE.padding_nbytes(),
        IMAGE.required_nbytes() - 480 * 641 * 4
    );

    let col = layout!(u16, [3, 5], col_major);
    assert_eq!(
        Layout::from(col),
        ColMajor
            .layout(&[3, 5], DType::UINT16, Device::CPU)
            .unwrap()
    );
    let nhwc = layout!(u8, [1, 3, 4, 5], permuted(0, 2, 3, 1));
    assert_eq!(nhwc.strides(), &[60, 1, 15, 3]);
    let row = layout!(f64, [2, 3]);
    assert_eq!(row.strides(), &[3, 1]);
    assert_eq!(row.required_nbytes(), 48);
    let aligned_perm = layout!(
        i32,
        [4, 3, 2],
        aligned(permuted(2, 0, 1), unit_stride = 32, base = 64)
    );
    let policy = Aligned::new(Permuted::new([2, 0, 1]), 32, 64).unwrap();
    assert_eq!(
        Layout::from(aligned_perm),
        policy
            .layout(&[4, 3, 2], DType::INT32, Device::CPU)
            .unwrap()
    );
}

#[test]
fn the_const_rule_refuses_what_the_runtime_refuses() {
    let zero = StaticLayout::resolve(
        [2, 3],
        DType::FLOAT64,
        StaticPlan::row_major().aligned(0, 1),
    );
    assert!(matches!(zero, Err(LayoutRuleError::ZeroUnitStride)));
    assert!(Aligned::new(RowMajor, 0, 1).is_err());
    // What both accept, they resolve alike: a unit stride finer than an
    // element, or not a power of two, pads to the least common multiple.
    for (unit, dtype) in [
        (4, DType::FLOAT64),
        (48, DType::FLOAT32),
        (12, DType::INT64),
    ] {
        let fixed =
            StaticLayout::resolve([2, 3], dtype, StaticPlan::row_major().aligned(unit, 1)).unwrap();
        let run_time = Aligned::new(RowMajor, unit, 1)
            .unwrap()
            .layout(&[2, 3], dtype, Device::CPU)
            .unwrap();
        assert_eq!(Layout::from(fixed), run_time);
    }
    let overflow = StaticLayout::resolve([usize::MAX / 2, 3], DType::INT8, StaticPlan::row_major());
    assert!(matches!(overflow, Err(LayoutRuleError::Overflow(_))));
    assert!(
        RowMajor
            .layout(&[usize::MAX / 2, 3], DType::INT8, Device::CPU)
            .is_err()
    );
}

fn dtypes() -> impl Strategy<Value = DType> {
    prop::sample::select(DType::STANDARD.to_vec())
}

/// `(unit_stride, base)`: powers of two from 1 to 512.
fn alignments() -> impl Strategy<Value = (usize, usize)> {
    (0u32..10, 0u32..10).prop_map(|(u, b)| (1 << u, 1 << b))
}

/// Resolves a rank-`N` shape both ways and compares.
fn compare<const N: usize>(
    shape: [usize; N],
    dtype: DType,
    order: [usize; N],
    aligned: Option<(usize, usize)>,
) -> Result<(), TestCaseError> {
    let mut plan = StaticPlan::permuted(order);
    let mut policy: std::sync::Arc<dyn LayoutPolicy> = std::sync::Arc::new(Permuted::new(order));
    if let Some((unit, base)) = aligned {
        plan = plan.aligned(unit, base);
        policy = std::sync::Arc::new(Aligned::over(policy, unit, base).unwrap());
    }
    let fixed = StaticLayout::resolve(shape, dtype, plan);
    let runtime = Layout::resolve(&policy, &shape, dtype, Device::CPU);
    match (fixed, runtime) {
        (Ok(fixed), Ok(runtime)) => {
            prop_assert_eq!(fixed.to_layout(), runtime.clone());
            prop_assert_eq!(fixed.permutation(), runtime.permutation());
            prop_assert_eq!(fixed.numel(), runtime.numel());
        }
        (Err(_), Err(_)) => {}
        (fixed, runtime) => prop_assert!(false, "disagree: {fixed:?} vs {runtime:?}"),
    }
    Ok(())
}

proptest! {
    #[test]
    fn const_and_runtime_resolution_agree_rank_3(
        shape in prop::array::uniform3(0usize..40),
        dtype in dtypes(),
        order in Just([0usize, 1, 2]).prop_shuffle(),
        aligned in prop::option::of(alignments()),
    ) {
        compare(shape, dtype, order, aligned)?;
    }

    #[test]
    fn const_and_runtime_resolution_agree_rank_1(
        shape in prop::array::uniform1(0usize..1000),
        dtype in dtypes(),
        aligned in prop::option::of(alignments()),
    ) {
        compare(shape, dtype, [0], aligned)?;
    }

    #[test]
    fn row_and_col_major_plans_match_their_policies(
        shape in prop::array::uniform2(1usize..50),
        dtype in dtypes(),
    ) {
        let row = StaticLayout::resolve(shape, dtype, StaticPlan::row_major()).unwrap();
        prop_assert_eq!(row.to_layout(), RowMajor.layout(&shape, dtype, Device::CPU).unwrap());
        let col = StaticLayout::resolve(shape, dtype, StaticPlan::col_major()).unwrap();
        prop_assert_eq!(col.to_layout(), ColMajor.layout(&shape, dtype, Device::CPU).unwrap());
    }

    #[test]
    fn huge_shapes_fail_alike(
        big in (usize::MAX / 64)..usize::MAX,
        small in 2usize..64,
        dtype in dtypes(),
    ) {
        compare([big, small], dtype, [0, 1], None)?;
    }
}

/// A user type over a dtype, as `#[derive(Element)]` makes it.
#[derive(Clone, Copy, Debug, PartialEq, Element)]
#[repr(transparent)]
#[element(dtype = "float32")]
struct Celsius(f32);

#[derive(Clone, Copy, Debug, PartialEq, Element)]
#[repr(C)]
#[element(dtype = "complex64")]
struct Complex32 {
    re: f32,
    im: f32,
}

#[test]
fn derived_elements_carry_their_dtype() {
    assert_eq!(Celsius::DTYPE, DType::FLOAT32);
    assert_eq!(<Complex32 as Element>::DTYPE, DType::COMPLEX64);
    let l = layout!(Complex32, [4, 4], col_major);
    assert_eq!(l.required_nbytes(), 128);
    assert_eq!(l.dtype(), DType::COMPLEX64);
}
