//! Layouts resolved at compile time: what `layout!` expands to.

use smallvec::SmallVec;

use crate::dtype::DType;

use super::Layout;
use super::rule::{LayoutRuleError, resolve};

/// The compile-time counterpart of a [`LayoutPolicy`](super::LayoutPolicy):
/// a dimension order, optionally wrapped in [`Aligned`](super::Aligned)'s
/// row padding and base alignment.
///
/// ```
/// use devmm::StaticPlan;
/// const NHWC: StaticPlan<4> = StaticPlan::permuted([0, 2, 3, 1]).aligned(64, 256);
/// assert_eq!(NHWC.order(), &[0, 2, 3, 1]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StaticPlan<const N: usize> {
    order: [usize; N],
    /// `(unit_stride_alignment, base_alignment)` of an `Aligned` wrapper;
    /// `(1, 1)` adds nothing to the dense plan.
    aligned: (usize, usize),
}

impl<const N: usize> StaticPlan<N> {
    /// [`RowMajor`](super::RowMajor): the last dimension is contiguous.
    pub const fn row_major() -> Self {
        let mut order = [0; N];
        let mut i = 0;
        while i < N {
            order[i] = i;
            i += 1;
        }
        StaticPlan::permuted(order)
    }

    /// [`ColMajor`](super::ColMajor): the first dimension is contiguous.
    pub const fn col_major() -> Self {
        let mut order = [0; N];
        let mut i = 0;
        while i < N {
            order[i] = N - 1 - i;
            i += 1;
        }
        StaticPlan::permuted(order)
    }

    /// [`Permuted`](super::Permuted): dimensions in `order`, outermost first.
    pub const fn permuted(order: [usize; N]) -> Self {
        StaticPlan {
            order,
            aligned: (1, 1),
        }
    }

    /// [`Aligned`](super::Aligned) over this plan: rows padded to
    /// `unit_stride_alignment` bytes, the base on `base_alignment`.
    pub const fn aligned(self, unit_stride_alignment: usize, base_alignment: usize) -> Self {
        StaticPlan {
            order: self.order,
            aligned: (unit_stride_alignment, base_alignment),
        }
    }

    /// The dimension order, outermost first.
    pub const fn order(&self) -> &[usize; N] {
        &self.order
    }
}

/// A layout of a fixed rank, resolved by the same rule as [`Layout`] but in
/// a `const fn`, so `layout!` computes it at compile time.
///
/// ```
/// use devmm::{DType, Device, Layout, LayoutPolicy, RowMajor, StaticLayout, StaticPlan};
/// const L: StaticLayout<2> = match StaticLayout::resolve([2, 3], DType::FLOAT32, StaticPlan::row_major()) {
///     Ok(layout) => layout,
///     Err(_) => panic!("invalid layout"),
/// };
/// assert_eq!((L.strides(), L.required_nbytes()), (&[3, 1], 24));
/// assert_eq!(Layout::from(L), RowMajor.layout(&[2, 3], DType::FLOAT32, Device::CPU)?);
/// # Ok::<(), devmm::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StaticLayout<const N: usize> {
    shape: [usize; N],
    strides: [usize; N],
    permutation: [usize; N],
    dtype: DType,
    required_nbytes: usize,
    base_alignment: usize,
}

impl<const N: usize> StaticLayout<N> {
    /// Resolves `shape` of `dtype` under `plan`, refusing what the run-time
    /// policy would refuse.
    pub const fn resolve(
        shape: [usize; N],
        dtype: DType,
        plan: StaticPlan<N>,
    ) -> Result<Self, LayoutRuleError> {
        let itemsize = dtype.itemsize();
        let (unit, base) = plan.aligned;
        let mut strides = [0; N];
        match resolve(&shape, &plan.order, itemsize, unit, base, &mut strides) {
            Ok(required_nbytes) => Ok(StaticLayout {
                shape,
                strides,
                permutation: plan.order,
                dtype,
                required_nbytes,
                base_alignment: base,
            }),
            Err(e) => Err(e),
        }
    }

    /// Extents, one per dimension.
    pub const fn shape(&self) -> &[usize; N] {
        &self.shape
    }

    /// Strides in elements, one per dimension.
    pub const fn strides(&self) -> &[usize; N] {
        &self.strides
    }

    /// The dimension order, outermost first.
    pub const fn permutation(&self) -> &[usize; N] {
        &self.permutation
    }

    /// The element type.
    pub const fn dtype(&self) -> DType {
        self.dtype
    }

    /// Bytes to allocate.
    pub const fn required_nbytes(&self) -> usize {
        self.required_nbytes
    }

    /// The alignment the first element's address must meet.
    pub const fn base_alignment(&self) -> usize {
        self.base_alignment
    }

    /// Number of elements.
    pub const fn numel(&self) -> usize {
        // Cannot overflow: required_nbytes, computed checked, bounds it.
        let mut n = 1;
        let mut i = 0;
        while i < N {
            n *= self.shape[i];
            i += 1;
        }
        n
    }

    /// Bytes of the allocation that hold no element: row padding plus the
    /// rounding of the size to the base alignment.
    ///
    /// ```
    /// # use devmm::{DType, StaticLayout, StaticPlan};
    /// let plan = StaticPlan::row_major().aligned(16, 64);
    /// let l = StaticLayout::resolve([2, 3], DType::FLOAT32, plan).unwrap();
    /// assert_eq!((l.strides(), l.required_nbytes(), l.padding_nbytes()), (&[4, 1], 64, 40));
    /// ```
    pub const fn padding_nbytes(&self) -> usize {
        self.required_nbytes - self.numel() * self.dtype.itemsize()
    }

    /// The run-time [`Layout`] describing the same memory.
    pub fn to_layout(&self) -> Layout {
        Layout {
            shape: SmallVec::from_slice(&self.shape),
            strides: SmallVec::from_slice(&self.strides),
            permutation: SmallVec::from_slice(&self.permutation),
            itemsize: self.dtype.itemsize(),
            required_nbytes: self.required_nbytes,
            base_alignment: self.base_alignment,
            policy: None,
        }
    }
}

impl<const N: usize> From<StaticLayout<N>> for Layout {
    fn from(layout: StaticLayout<N>) -> Layout {
        layout.to_layout()
    }
}
