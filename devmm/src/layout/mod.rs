//! Layouts: how a shape's elements sit in memory.
//!
//! A [`LayoutPolicy`] turns `(shape, dtype, device)` into a resolved
//! [`Layout`] through one resolution rule, so every policy (and the
//! `layout!` macro) agrees on strides, padding and sizes:
//!
//! - the policy picks a dimension order (outermost first), a unit-stride
//!   alignment and a base alignment;
//! - the innermost dimension has stride 1, and its extent is padded so its
//!   byte length is a multiple of the unit-stride alignment;
//! - each outer dimension's stride is the next inner stride times that
//!   dimension's (padded) extent;
//! - required bytes are `(1 + Σ stride·(extent−1))·itemsize`, rounded up to
//!   the base alignment, and zero when any extent is zero.
//!
//! Strides are in elements (DLPack's convention), positive, and never make
//! two elements overlap. Every size computation is overflow-checked.

mod policy;
mod rule;
mod static_layout;

use std::fmt;
use std::sync::Arc;

use smallvec::SmallVec;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::size::{checked_add, checked_mul};

pub use policy::{Aligned, ColMajor, DeviceOptimal, LayoutPlan, LayoutPolicy, Permuted, RowMajor};
pub use rule::LayoutRuleError;
pub use static_layout::{StaticLayout, StaticPlan};

/// The rank up to which a layout's per-dimension lists live inline. DLPack
/// allows any rank, but tensors of more than eight dimensions are rare;
/// below it no rank costs an allocation, so `empty` has no step from one
/// common rank to the next (with four, rank 5 took three more allocations
/// than rank 4: docs/benchmarks.md).
const INLINE_DIMS: usize = 8;

/// A short list of per-dimension numbers, inline up to eight dimensions.
///
/// ```
/// let dims: devmm::Dims = (0..8).collect();
/// assert!(!dims.spilled());
/// ```
pub type Dims = SmallVec<[usize; INLINE_DIMS]>;

/// `n` zeros, to be filled: up to [`INLINE_DIMS`] one inline copy rather
/// than `from_elem`'s element-by-element loop.
fn zeros(n: usize) -> Dims {
    if n <= INLINE_DIMS {
        SmallVec::from_buf_and_len([0; INLINE_DIMS], n)
    } else {
        SmallVec::from_elem(0, n)
    }
}

/// A resolved layout: shape, strides, the order that produced them, the
/// bytes to allocate and the alignment the base address needs.
///
/// ```
/// use devmm::{DType, Device, Layout, LayoutPolicy, RowMajor};
/// let layout = RowMajor.layout(&[2, 3], DType::FLOAT32, Device::CPU)?;
/// assert_eq!(layout.strides(), &[3, 1]);
/// assert_eq!(layout.required_nbytes(), 24);
///
/// // Hand-built layouts are validated: these strides overlap.
/// assert!(Layout::new(&[2, 3], &[2, 1], DType::FLOAT32, 4).is_err());
/// # Ok::<(), devmm::Error>(())
/// ```
#[derive(Clone)]
pub struct Layout {
    shape: Dims,
    strides: Dims,
    permutation: Dims,
    itemsize: usize,
    required_nbytes: usize,
    base_alignment: usize,
    policy: Option<Arc<dyn LayoutPolicy>>,
}

impl Layout {
    /// Resolves `shape` under `policy`; the layout remembers the policy.
    pub fn resolve(
        policy: &Arc<dyn LayoutPolicy>,
        shape: &[usize],
        dtype: DType,
        device: crate::Device,
    ) -> Result<Layout> {
        if let Some(layout) = Layout::known(policy, shape, dtype, device) {
            return Ok(layout);
        }
        let plan = policy.plan(shape, dtype, device)?;
        Layout::from_plan(shape, dtype, plan, Arc::clone(policy))
    }

    /// [`resolve`](Layout::resolve)'s fast path for the shipped policies
    /// whose plan is known without asking (see [`policy::known_plan`]): the
    /// dense ones and `DeviceOptimal`, Python's default. With powers of two
    /// for the item size and both alignments (every shipped alignment,
    /// every byte-sized dtype), the rule reduces to one pass: each stride is
    /// the product of the (zero-as-one) extents inside it, the innermost
    /// padded to the row multiple (the larger of its alignment and the item
    /// size, their least common multiple); the elements spanned,
    /// `1 + Σ stride·(extent−1)`, telescope to that product less the
    /// innermost row's padding; the required bytes, unless an extent is
    /// zero, are those elements' bytes rounded up to the base alignment.
    /// `None` (another policy, a packed dtype, a refused order, any
    /// overflow) sends the call down the general path, which gives the
    /// layout or the error; `tests/layout_props.rs` checks the two agree.
    fn known(
        policy: &Arc<dyn LayoutPolicy>,
        shape: &[usize],
        dtype: DType,
        device: crate::Device,
    ) -> Option<Layout> {
        if !dtype.is_byte_sized() {
            return None;
        }
        let plan = policy::known_plan(policy.as_ref(), shape.len(), device)?;
        let itemsize = dtype.itemsize();
        let (unit, base) = (plan.unit_stride_alignment, plan.base_alignment);
        if !(itemsize.is_power_of_two() && unit.is_power_of_two() && base.is_power_of_two()) {
            return None;
        }
        let row_multiple = unit.max(itemsize);
        let mut strides = zeros(shape.len());
        let mut running = 1usize;
        let mut padding = 0usize;
        for (position, &dim) in plan.permutation.iter().enumerate().rev() {
            strides[dim] = running;
            let mut extent = shape[dim].max(1);
            if position + 1 == shape.len() && row_multiple != itemsize {
                let bytes = extent.checked_mul(itemsize)?;
                let padded = bytes.checked_add(row_multiple - 1)? & !(row_multiple - 1);
                padding = (padded - bytes) / itemsize;
                extent = padded / itemsize;
            }
            running = running.checked_mul(extent)?;
        }
        // At least the innermost row's bytes, which the rule checks padded
        // or not: this not overflowing, neither do they.
        let bytes = (running - padding).checked_mul(itemsize)?;
        let required_nbytes = if shape.contains(&0) {
            0
        } else {
            bytes.checked_add(base - 1)? & !(base - 1)
        };
        Some(Layout {
            shape: SmallVec::from_slice(shape),
            strides,
            permutation: plan.permutation,
            itemsize,
            required_nbytes,
            base_alignment: base,
            policy: Some(Arc::clone(policy)),
        })
    }

    /// Applies the resolution rule to a plan, keeping its permutation. The
    /// layout is built once, in its final place: at eight inline dimensions
    /// it is a few hundred bytes, and every move is a copy.
    fn from_plan(
        shape: &[usize],
        dtype: DType,
        plan: LayoutPlan,
        policy: Arc<dyn LayoutPolicy>,
    ) -> Result<Layout> {
        let itemsize = element_size(dtype)?;
        let mut strides = zeros(shape.len());
        let required_nbytes = rule::resolve(
            shape,
            &plan.permutation,
            itemsize,
            plan.unit_stride_alignment,
            plan.base_alignment,
            &mut strides,
        )
        .map_err(|e| rule_error(e, &plan.permutation, shape.len(), dtype))?;
        Ok(Layout {
            shape: SmallVec::from_slice(shape),
            strides,
            permutation: plan.permutation,
            itemsize,
            required_nbytes,
            base_alignment: plan.base_alignment,
            policy: Some(policy),
        })
    }

    /// A hand-built layout, validated: same rank, positive strides that
    /// never overlap, a power-of-two base alignment, sizes that fit `usize`.
    pub fn new(
        shape: &[usize],
        strides: &[usize],
        dtype: DType,
        base_alignment: usize,
    ) -> Result<Layout> {
        Layout::from_dims(
            SmallVec::from_slice(shape),
            SmallVec::from_slice(strides),
            dtype,
            base_alignment,
        )
    }

    /// [`new`](Layout::new) over lists the caller built (a DLPack import
    /// reads them from the producer), kept rather than copied.
    pub(crate) fn from_dims(
        shape: Dims,
        strides: Dims,
        dtype: DType,
        base_alignment: usize,
    ) -> Result<Layout> {
        if shape.len() != strides.len() {
            return Err(Error::layout(format!(
                "rank mismatch: shape has {} dimensions but strides has {}; give one stride per dimension",
                shape.len(),
                strides.len()
            )));
        }
        if !base_alignment.is_power_of_two() {
            return Err(Error::layout(format!(
                "base alignment must be a power of two, not {base_alignment}"
            )));
        }
        // Row-major strides, what nearly every producer sends, are in order
        // and cannot overlap: the sort and the overlap walk are skipped.
        let row_major = is_row_major(&shape, &strides);
        let permutation = if row_major {
            (0..shape.len()).collect()
        } else {
            order_by_stride(&shape, &strides)
        };
        let itemsize = element_size(dtype)?;
        let layout = Layout {
            required_nbytes: rule::required_nbytes(&shape, &strides, itemsize, base_alignment)?,
            shape,
            strides,
            itemsize,
            permutation,
            base_alignment,
            policy: None,
        };
        if !row_major {
            layout.validate()?;
        }
        Ok(layout)
    }

    /// Checks the invariants every layout keeps: positive strides, no two
    /// elements at the same address, and required bytes covering the last
    /// addressable element.
    pub fn validate(&self) -> Result<()> {
        if let Some(dim) = self.strides.iter().position(|&s| s == 0) {
            return Err(Error::layout(format!(
                "stride of dimension {dim} is 0; strides must be positive (broadcasting is not storage)"
            )));
        }
        check_permutation(&self.permutation, self.shape.len())?;
        if self.shape.contains(&0) {
            return Ok(());
        }
        // Walking dimensions from the smallest stride up, each stride must
        // step past everything the inner dimensions span: one element past
        // the last of them, at the sum of their strides times their extents
        // less one (each inner dimension adds its reach to the span).
        let mut span = 1usize;
        for &dim in self.permutation.iter().rev() {
            let (extent, stride) = (self.shape[dim], self.strides[dim]);
            if extent > 1 && stride < span {
                return Err(Error::layout(format!(
                    "stride {stride} of dimension {dim} overlaps the {span} elements spanned by the \
                     dimensions inside it; use a stride of at least {span}"
                )));
            }
            let reach = checked_mul(stride, extent - 1, "span")?;
            span = checked_add(span, reach, "span")?;
        }
        let last = checked_mul(span, self.itemsize, "required bytes")?;
        if self.required_nbytes < last {
            return Err(Error::layout(format!(
                "required bytes {} do not cover the last element (needs {last})",
                self.required_nbytes
            )));
        }
        Ok(())
    }

    /// [`validate`](Layout::validate), and, when given, that the layout is
    /// for `shape` and elements of `itemsize` bytes (a layout applied to a
    /// tensor it was not resolved for is refused, naming both).
    ///
    /// ```
    /// use devmm::{DType, Device, LayoutPolicy, RowMajor};
    /// let layout = RowMajor.layout(&[2, 3], DType::FLOAT32, Device::CPU)?;
    /// layout.validate_for(Some(&[2, 3]), Some(4))?;
    /// assert!(layout.validate_for(Some(&[3, 2]), None).is_err());
    /// assert!(layout.validate_for(None, Some(8)).is_err());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn validate_for(&self, shape: Option<&[usize]>, itemsize: Option<usize>) -> Result<()> {
        if let Some(shape) = shape.filter(|s| *s != self.shape.as_slice()) {
            return Err(Error::layout(format!(
                "the layout is for shape {:?}, not {shape:?}; resolve a layout for this shape",
                self.shape.as_slice()
            )));
        }
        if let Some(itemsize) = itemsize.filter(|&i| i != self.itemsize) {
            return Err(Error::layout(format!(
                "the layout is for {}-byte elements, not {itemsize}-byte ones; resolve a layout for this dtype",
                self.itemsize
            )));
        }
        self.validate()
    }

    /// Extents, one per dimension.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Strides in elements, one per dimension.
    pub fn strides(&self) -> &[usize] {
        &self.strides
    }

    /// Dimensions ordered from the largest stride to the smallest.
    pub fn permutation(&self) -> &[usize] {
        &self.permutation
    }

    /// Bytes per element.
    pub fn itemsize(&self) -> usize {
        self.itemsize
    }

    /// Number of elements (the product of the extents).
    pub fn numel(&self) -> usize {
        if self.shape.contains(&0) {
            return 0;
        }
        // Cannot overflow: without zero extents, the checked required_nbytes
        // covers every element.
        self.shape.iter().product()
    }

    /// Bytes to allocate: covers the last element, rounded up to the base alignment.
    pub fn required_nbytes(&self) -> usize {
        self.required_nbytes
    }

    /// The alignment the first element's address must meet.
    pub fn base_alignment(&self) -> usize {
        self.base_alignment
    }

    /// The plan that lays a shape out in this layout's dimension order on
    /// its base alignment, unpadded: all that [`Aligned`] takes of the
    /// layout an inner policy resolved (the padding is its own).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use devmm::{ColMajor, DType, Device, Layout, LayoutPolicy};
    /// let col_major: Arc<dyn LayoutPolicy> = Arc::new(ColMajor);
    /// let layout = Layout::resolve(&col_major, &[2, 3], DType::FLOAT32, Device::CPU)?;
    /// let plan = layout.plan();
    /// assert_eq!((&plan.permutation[..], plan.unit_stride_alignment), (&[1, 0][..], 1));
    /// assert_eq!(plan.base_alignment, layout.base_alignment());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn plan(&self) -> LayoutPlan {
        LayoutPlan {
            permutation: self.permutation.clone(),
            unit_stride_alignment: 1,
            base_alignment: self.base_alignment,
        }
    }

    /// The policy that produced this layout, `None` for hand-built ones.
    pub fn policy(&self) -> Option<&Arc<dyn LayoutPolicy>> {
        self.policy.as_ref()
    }

    /// Whether the elements are densely packed in some dimension order:
    /// no padding between them, so the span they cover is exactly
    /// `numel · itemsize` bytes (a padded [`Aligned`] layout is not).
    ///
    /// ```
    /// use devmm::{Aligned, ColMajor, DType, Device, LayoutPolicy, RowMajor};
    /// assert!(ColMajor.layout(&[2, 3], DType::FLOAT32, Device::CPU)?.is_contiguous());
    /// let padded = Aligned::new(RowMajor, 64, 64)?.layout(&[2, 3], DType::FLOAT32, Device::CPU)?;
    /// assert!(!padded.is_contiguous());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn is_contiguous(&self) -> bool {
        let numel = self.numel();
        numel == 0
            || rule::required_nbytes(&self.shape, &self.strides, self.itemsize, 1)
                .is_ok_and(|span| numel.checked_mul(self.itemsize) == Some(span))
    }

    /// Whether the elements are densely packed in row-major order.
    pub fn is_c_contiguous(&self) -> bool {
        let mut expected = 1usize;
        for (&extent, &stride) in self.shape.iter().zip(&self.strides).rev() {
            if extent > 1 && stride != expected {
                return false;
            }
            expected = expected.saturating_mul(extent);
        }
        true
    }
}

impl fmt::Debug for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Layout")
            .field("shape", &self.shape.as_slice())
            .field("strides", &self.strides.as_slice())
            .field("required_nbytes", &self.required_nbytes)
            .field("base_alignment", &self.base_alignment)
            .field("policy", &self.policy)
            .finish()
    }
}

impl PartialEq for Layout {
    /// Layouts are equal when they describe the same memory; provenance aside.
    fn eq(&self, other: &Layout) -> bool {
        self.shape == other.shape
            && self.strides == other.strides
            && self.itemsize == other.itemsize
            && self.required_nbytes == other.required_nbytes
            && self.base_alignment == other.base_alignment
    }
}

impl Eq for Layout {}

impl std::hash::Hash for Layout {
    /// Hashes what equality compares, so equal layouts hash alike.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.shape.hash(state);
        self.strides.hash(state);
        self.itemsize.hash(state);
        self.required_nbytes.hash(state);
        self.base_alignment.hash(state);
    }
}

/// The bytes one element of `dtype` takes, for dtypes whose elements can be
/// strided one by one; DLPack 1.1's packed float4/float6 scalars cannot.
pub(crate) fn element_size(dtype: DType) -> Result<usize> {
    if dtype.is_byte_sized() {
        Ok(dtype.itemsize())
    } else {
        Err(Error::layout(format!(
            "{dtype} packs {} bits per element, so its elements have no byte address of their own; \
             lay out whole bytes (a uint8 tensor of the packed data, or lanes that fill bytes)",
            dtype.bits() as u32 * dtype.lanes() as u32
        )))
    }
}

fn check_permutation(permutation: &[usize], ndim: usize) -> Result<()> {
    if rule::is_permutation(permutation, ndim) {
        Ok(())
    } else {
        Err(not_a_permutation(permutation, ndim))
    }
}

fn not_a_permutation(permutation: &[usize], ndim: usize) -> Error {
    Error::layout(format!(
        "{permutation:?} is not a permutation of the {ndim} dimensions 0..{ndim}; \
         list each dimension exactly once, outermost first"
    ))
}

/// The run-time message for a refusal of the rule.
fn rule_error(error: LayoutRuleError, permutation: &[usize], ndim: usize, dtype: DType) -> Error {
    match error {
        LayoutRuleError::Overflow(overflow) => overflow.into(),
        LayoutRuleError::NotAPermutation => not_a_permutation(permutation, ndim),
        LayoutRuleError::NotPowerOfTwo { what, value } => {
            Error::layout(format!("{what} must be a power of two, not {value}"))
        }
        LayoutRuleError::ZeroUnitStride => Error::layout(format!(
            "a unit-stride alignment of 0 pads {dtype} rows to nothing; use 1 for no padding"
        )),
    }
}

/// Dimensions from the largest stride to the smallest (ties: later
/// dimension inner, as in row-major).
/// Whether `strides` are the row-major strides of `shape` with no extent 0:
/// each the product of the extents inside it, the innermost 1. Such a
/// layout passes [`Layout::validate`] with the identity order, which is
/// what [`order_by_stride`] gives it (strides never grow inwards, and
/// equal ones keep their index order).
fn is_row_major(shape: &[usize], strides: &[usize]) -> bool {
    let mut expected = 1usize;
    for (&extent, &stride) in shape.iter().zip(strides).rev() {
        if extent == 0 || stride != expected {
            return false;
        }
        match expected.checked_mul(extent) {
            Some(next) => expected = next,
            None => return false,
        }
    }
    true
}

fn order_by_stride(shape: &[usize], strides: &[usize]) -> Dims {
    let mut order: Dims = (0..shape.len()).collect();
    order.sort_by(|&a, &b| strides[b].cmp(&strides[a]).then(a.cmp(&b)));
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Device;

    // Not under Miri: safe code only, and proptest's failure file asks
    // for the working directory, which Miri's isolation refuses.
    #[cfg(not(miri))]
    proptest::proptest! {
        /// The row-major shortcut of `Layout::new` decides as the general
        /// path does: the same order, and a layout `validate` accepts.
        #[test]
        fn row_major_strides_take_the_general_paths_order(
            shape in proptest::collection::vec(1usize..5, 0..6),
        ) {
            let mut strides = vec![1usize; shape.len()];
            for i in (0..shape.len().saturating_sub(1)).rev() {
                strides[i] = strides[i + 1] * shape[i + 1];
            }
            proptest::prop_assert!(is_row_major(&shape, &strides));
            let layout = Layout::new(&shape, &strides, DType::FLOAT32, 1).unwrap();
            proptest::prop_assert_eq!(layout.permutation(), &order_by_stride(&shape, &strides)[..]);
            proptest::prop_assert!(layout.validate().is_ok());
        }
    }

    #[test]
    fn strides_that_are_not_row_major_take_the_general_path() {
        assert!(!is_row_major(&[2, 3], &[1, 2]), "column-major");
        assert!(!is_row_major(&[2, 3], &[4, 1]), "padded rows");
        assert!(!is_row_major(&[0, 3], &[3, 1]), "an empty extent");
        assert!(
            !is_row_major(&[usize::MAX, 2, 2], &[4, 2, 1]),
            "a span past usize"
        );
        // Overlapping strides are still refused, by the general path.
        let err = Layout::new(&[2, 2], &[1, 1], DType::FLOAT32, 1).unwrap_err();
        assert!(err.to_string().contains("overlaps"), "{err}");
    }

    #[test]
    fn a_layouts_plan_resolves_the_same_order() {
        let permuted: Arc<dyn LayoutPolicy> = Arc::new(Permuted::try_new([0, 2, 1]).unwrap());
        let first = Layout::resolve(&permuted, &[2, 3, 4], DType::INT16, Device::CPU).unwrap();
        let plan = first.plan();
        assert_eq!(&plan.permutation[..], first.permutation());
        assert_eq!(plan.base_alignment, first.base_alignment());
        let again: Arc<dyn LayoutPolicy> = Arc::new(Permuted::try_new(plan.permutation).unwrap());
        let second = Layout::resolve(&again, &[2, 3, 4], DType::INT16, Device::CPU).unwrap();
        assert_eq!(first.strides(), second.strides());
    }
}
