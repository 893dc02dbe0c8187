//! The resolution rule as `const fn`s over slices.
//!
//! Run-time layouts ([`Layout::resolve`](super::Layout::resolve)) and
//! compile-time ones ([`StaticLayout`](super::StaticLayout), what `layout!`
//! expands to) both call these, so the two cannot disagree.

use crate::size::{SizeOverflow, checked_add, checked_mul, lcm, round_up, round_up_multiple};

/// Why the resolution rule refused a plan.
///
/// The `const` counterpart of [`Error::InvalidLayout`](crate::Error::InvalidLayout):
/// a value a `const` item can match on, which converts to the error with its
/// full message at run time.
///
/// ```
/// use devmm::{DType, LayoutRuleError, StaticLayout, StaticPlan};
/// let plan = StaticPlan::permuted([0, 0]);
/// assert_eq!(StaticLayout::resolve([2, 2], DType::UINT8, plan), Err(LayoutRuleError::NotAPermutation));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LayoutRuleError {
    /// A size does not fit `usize`.
    Overflow(SizeOverflow),
    /// The dimension order does not list each dimension exactly once.
    NotAPermutation,
    /// A base alignment that is not a power of two.
    NotPowerOfTwo {
        /// Which alignment.
        what: &'static str,
        /// Its value.
        value: usize,
    },
    /// A unit-stride alignment of zero (1 means no padding).
    ZeroUnitStride,
}

impl From<SizeOverflow> for LayoutRuleError {
    fn from(o: SizeOverflow) -> Self {
        LayoutRuleError::Overflow(o)
    }
}

/// `?` for `const fn`, where the `Try` trait is not available.
macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => return Err(LayoutRuleError::Overflow(e)),
        }
    };
}

/// Whether `permutation` lists each of `0..ndim` exactly once.
pub(crate) const fn is_permutation(permutation: &[usize], ndim: usize) -> bool {
    if permutation.len() != ndim {
        return false;
    }
    // Quadratic, allocation-free: ranks are small and this runs in const.
    let mut i = 0;
    while i < ndim {
        if permutation[i] >= ndim {
            return false;
        }
        let mut j = 0;
        while j < i {
            if permutation[j] == permutation[i] {
                return false;
            }
            j += 1;
        }
        i += 1;
    }
    true
}

/// Fills `strides` (in elements) by the resolution rule and returns the
/// required bytes. `shape`, `permutation` and `strides` have the same length.
pub(crate) const fn resolve(
    shape: &[usize],
    permutation: &[usize],
    itemsize: usize,
    unit_stride_alignment: usize,
    base_alignment: usize,
    strides: &mut [usize],
) -> Result<usize, LayoutRuleError> {
    if !is_permutation(permutation, shape.len()) {
        return Err(LayoutRuleError::NotAPermutation);
    }
    if unit_stride_alignment == 0 {
        return Err(LayoutRuleError::ZeroUnitStride);
    }
    if !base_alignment.is_power_of_two() {
        return Err(LayoutRuleError::NotPowerOfTwo {
            what: "base alignment",
            value: base_alignment,
        });
    }
    // Pad rows to the least multiple of the item size and the alignment
    // (the seed's rule: any positive alignment, not only powers of two).
    // Dense plans (alignment 1, the common case) pad nothing: skip the
    // divisions of the least common multiple and of the rounding.
    let row_multiple = if unit_stride_alignment == 1 {
        itemsize
    } else {
        tri!(lcm(unit_stride_alignment, itemsize, "row alignment"))
    };
    let mut running = 1usize;
    let mut position = permutation.len();
    while position > 0 {
        position -= 1;
        let dim = permutation[position];
        strides[dim] = running;
        let mut extent = if shape[dim] == 0 { 1 } else { shape[dim] };
        if position + 1 == permutation.len() {
            let bytes = tri!(checked_mul(extent, itemsize, "row length in bytes"));
            if row_multiple != itemsize {
                extent =
                    tri!(round_up_multiple(bytes, row_multiple, "padded row length")) / itemsize;
            }
        }
        running = tri!(checked_mul(running, extent, "stride"));
    }
    Ok(tri!(required_nbytes(
        shape,
        strides,
        itemsize,
        base_alignment
    )))
}

/// `(1 + Σ stride·(extent−1))·itemsize` rounded up to `base`; zero when any
/// extent is zero.
pub(crate) const fn required_nbytes(
    shape: &[usize],
    strides: &[usize],
    itemsize: usize,
    base: usize,
) -> Result<usize, SizeOverflow> {
    let mut i = 0;
    while i < shape.len() {
        if shape[i] == 0 {
            return Ok(0);
        }
        i += 1;
    }
    let mut last = 0usize;
    let mut i = 0;
    while i < shape.len() {
        let offset = match checked_mul(strides[i], shape[i] - 1, "element offset") {
            Ok(o) => o,
            Err(e) => return Err(e),
        };
        last = match checked_add(last, offset, "element offset") {
            Ok(l) => l,
            Err(e) => return Err(e),
        };
        i += 1;
    }
    let count = match checked_add(last, 1, "element count") {
        Ok(c) => c,
        Err(e) => return Err(e),
    };
    match checked_mul(count, itemsize, "required bytes") {
        Ok(bytes) => round_up(bytes, base, "required bytes"),
        Err(e) => Err(e),
    }
}
