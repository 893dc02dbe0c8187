//! The shipped layout policies.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use crate::device::{Device, DeviceType};
use crate::dtype::DType;
use crate::error::{Error, Result};

use smallvec::SmallVec;

use super::{Dims, Layout};

/// What a policy decides; [`Layout::resolve`] does the arithmetic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayoutPlan {
    /// Dimensions from outermost to innermost.
    pub permutation: Dims,
    /// Bytes the innermost dimension's length is padded to a multiple of
    /// (1: no padding).
    pub unit_stride_alignment: usize,
    /// The alignment of the first element (at least the dtype's).
    pub base_alignment: usize,
}

/// Turns `(shape, dtype, device)` into a [`LayoutPlan`].
///
/// Implement it for layouts of your own; [`LayoutPolicy::layout`] and
/// [`Layout::resolve`] apply the shared resolution rule to the plan. A
/// policy also declares the most alignment it ever asks for
/// ([`base_alignment`](LayoutPolicy::base_alignment),
/// [`unit_stride_alignment`](LayoutPolicy::unit_stride_alignment)): upper
/// bounds, not per-call values, since a policy may ask less for some
/// devices (no plan may ask more).
/// (`Any` lets [`Layout::resolve`] recognise the shipped dense policies,
/// whose plans it knows without asking; every `'static` type is `Any`.)
///
/// ```
/// use devmm::{ColMajor, DType, Device, LayoutPolicy};
/// let layout = ColMajor.layout(&[2, 3], DType::FLOAT32, Device::CPU)?;
/// assert_eq!(layout.strides(), &[1, 2]);
/// # Ok::<(), devmm::Error>(())
/// ```
pub trait LayoutPolicy: Any + Send + Sync + fmt::Debug {
    /// The dimension order and alignment demands for `shape`.
    fn plan(&self, shape: &[usize], dtype: DType, device: Device) -> Result<LayoutPlan>;

    /// The most bytes of base alignment any plan of this policy asks for.
    fn base_alignment(&self) -> usize;

    /// The most bytes of row padding any plan of this policy asks for
    /// (1: no padding).
    fn unit_stride_alignment(&self) -> usize;

    /// Resolves `shape` with a copy of this policy as the layout's provenance.
    fn layout(&self, shape: &[usize], dtype: DType, device: Device) -> Result<Layout>
    where
        Self: Sized + Clone,
    {
        let policy: Arc<dyn LayoutPolicy> = Arc::new(self.clone());
        Layout::resolve(&policy, shape, dtype, device)
    }
}

/// `0, 1, .., ndim - 1`: up to [`INLINE_DIMS`](super::INLINE_DIMS) one
/// inline copy of a constant, past it filled in place (collecting the
/// range through `Extend` cost a row-major plan 66 instructions, more than
/// the rest of it; filling 30).
fn row_major_order(ndim: usize) -> Dims {
    const IDENTITY: [usize; super::INLINE_DIMS] = {
        let mut order = [0; super::INLINE_DIMS];
        let mut dim = 0;
        while dim < order.len() {
            order[dim] = dim;
            dim += 1;
        }
        order
    };
    if ndim <= IDENTITY.len() {
        return SmallVec::from_buf_and_len(IDENTITY, ndim);
    }
    let mut order = Dims::from_elem(0, ndim);
    for (dim, slot) in order.iter_mut().enumerate() {
        *slot = dim;
    }
    order
}

fn col_major_order(ndim: usize) -> Dims {
    let mut order = row_major_order(ndim);
    order.reverse();
    order
}

/// `policy`'s plan for `ndim` dimensions on `device`, when `policy` is one
/// of the shipped policies whose plan depends on nothing else: the dense
/// ones (`RowMajor`, `ColMajor`, a `Permuted` whose order is one of `ndim`
/// dimensions: that order with no padding and no base alignment) and
/// `DeviceOptimal` (row-major, with the device's alignments), whatever the
/// shape and dtype, so [`Layout::resolve`] need not ask for one. `None`
/// for any other policy, and for a `Permuted` order its plan would refuse.
pub(super) fn known_plan(
    policy: &dyn LayoutPolicy,
    ndim: usize,
    device: Device,
) -> Option<LayoutPlan> {
    let policy: &dyn Any = policy;
    if policy.is::<RowMajor>() {
        Some(dense(row_major_order(ndim)))
    } else if policy.is::<DeviceOptimal>() {
        Some(DeviceOptimal::plan_on(ndim, device))
    } else if policy.is::<ColMajor>() {
        Some(dense(col_major_order(ndim)))
    } else {
        policy
            .downcast_ref::<Permuted>()
            .filter(|p| super::rule::is_permutation(&p.order, ndim))
            .map(|p| dense(p.order.clone()))
    }
}

/// A dense plan: no row padding, and no base alignment asked (as the
/// seed's dense policies ask none; `empty` still starts a tensor on its
/// elements' natural alignment).
fn dense(permutation: Dims) -> LayoutPlan {
    LayoutPlan {
        permutation,
        unit_stride_alignment: 1,
        base_alignment: 1,
    }
}

/// C order: the last dimension is contiguous.
///
/// ```
/// use devmm::{DType, Device, LayoutPolicy, RowMajor};
/// assert_eq!(RowMajor.layout(&[2, 3], DType::FLOAT32, Device::CPU)?.strides(), &[3, 1]);
/// # Ok::<(), devmm::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RowMajor;

impl LayoutPolicy for RowMajor {
    fn plan(&self, shape: &[usize], _dtype: DType, _device: Device) -> Result<LayoutPlan> {
        Ok(dense(row_major_order(shape.len())))
    }

    fn base_alignment(&self) -> usize {
        1
    }

    fn unit_stride_alignment(&self) -> usize {
        1
    }
}

/// Fortran order: the first dimension is contiguous.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ColMajor;

impl LayoutPolicy for ColMajor {
    fn plan(&self, shape: &[usize], _dtype: DType, _device: Device) -> Result<LayoutPlan> {
        Ok(dense(col_major_order(shape.len())))
    }

    fn base_alignment(&self) -> usize {
        1
    }

    fn unit_stride_alignment(&self) -> usize {
        1
    }
}

/// A dense layout in any dimension order, outermost first.
///
/// ```
/// use devmm::{DType, Device, LayoutPolicy, Permuted};
/// let nhwc = Permuted::new([0, 2, 3, 1]); // NCHW shape stored channels-last
/// assert_eq!(nhwc.layout(&[1, 3, 4, 5], DType::UINT8, Device::CPU)?.strides(), &[60, 1, 15, 3]);
/// assert!(Permuted::new([0, 0]).layout(&[2, 2], DType::UINT8, Device::CPU).is_err());
/// # Ok::<(), devmm::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Permuted {
    order: Dims,
}

impl Permuted {
    /// The order `order`, outermost dimension first.
    pub fn new(order: impl IntoIterator<Item = usize>) -> Permuted {
        Permuted {
            order: order.into_iter().collect(),
        }
    }

    /// The order `order`, checked when made: each of `0..order.len()`
    /// exactly once (a bad order is refused here, not at first use).
    ///
    /// ```
    /// use devmm::Permuted;
    /// assert_eq!(Permuted::try_new([1, 0])?.order(), &[1, 0]);
    /// assert!(Permuted::try_new([0, 0]).is_err());
    /// assert!(Permuted::try_new([0, 2]).is_err());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn try_new(order: impl IntoIterator<Item = usize>) -> Result<Permuted> {
        let permuted = Permuted::new(order);
        super::check_permutation(&permuted.order, permuted.order.len())?;
        Ok(permuted)
    }

    /// The dimension order, outermost first.
    pub fn order(&self) -> &[usize] {
        &self.order
    }

    /// The order of existing `strides` (in elements or bytes, either sign:
    /// only their magnitudes are compared), so a new tensor keeps another's
    /// memory order; `None` when that order is row-major already.
    ///
    /// ```
    /// use devmm::Permuted;
    /// // A Fortran-order 2x3 array (NumPy strides in bytes).
    /// assert_eq!(Permuted::of_strides(&[2, 3], &[8, 16]), Some(Permuted::new([1, 0])));
    /// assert_eq!(Permuted::of_strides(&[2, 3], &[24, -8]), None);
    /// ```
    pub fn of_strides(shape: &[usize], strides: &[isize]) -> Option<Permuted> {
        let magnitudes: Dims = strides.iter().map(|s| s.unsigned_abs()).collect();
        let order = super::order_by_stride(shape, &magnitudes);
        let row_major = order.iter().enumerate().all(|(i, &d)| i == d);
        (!row_major && order.len() == shape.len()).then_some(Permuted { order })
    }
}

impl LayoutPolicy for Permuted {
    fn plan(&self, shape: &[usize], _dtype: DType, _device: Device) -> Result<LayoutPlan> {
        if self.order.len() != shape.len() {
            return Err(Error::layout(format!(
                "permutation {:?} does not match the {}-d shape {shape:?}: it has {} entries; give one entry per dimension",
                self.order.as_slice(),
                shape.len(),
                self.order.len()
            )));
        }
        Ok(dense(self.order.clone()))
    }

    fn base_alignment(&self) -> usize {
        1
    }

    fn unit_stride_alignment(&self) -> usize {
        1
    }
}

/// Another policy's order with padded rows and an aligned base.
///
/// The innermost dimension's byte length is padded to a multiple of
/// `unit_stride_alignment`, so every row starts aligned; the first element
/// sits on a `base_alignment` boundary and the size is a multiple of it.
/// The order comes from the inner policy, the alignments are this
/// wrapper's own (the seed's rule: with nested wrappers the outermost
/// wins), so they are also its declared bounds.
///
/// ```
/// use devmm::{Aligned, DType, Device, LayoutPolicy, RowMajor};
/// let aligned = Aligned::new(RowMajor, 128, 256)?;
/// let layout = aligned.layout(&[4, 3], DType::FLOAT32, Device::CPU)?;
/// assert_eq!(layout.strides(), &[32, 1]);
/// assert_eq!(layout.required_nbytes() % 256, 0);
/// # Ok::<(), devmm::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Aligned {
    inner: Arc<dyn LayoutPolicy>,
    unit_stride_alignment: usize,
    base_alignment: usize,
}

impl Aligned {
    /// The row alignment the seed's `Aligned` takes when none is given:
    /// 128 bytes, the GPU's coalescing width ([`DeviceOptimal`]'s on a GPU).
    pub const DEFAULT_UNIT_STRIDE_ALIGNMENT: usize = 128;
    /// The base alignment the seed's `Aligned` takes when none is given:
    /// 256 bytes, what `cudaMalloc` and `hipMalloc` give.
    pub const DEFAULT_BASE_ALIGNMENT: usize = 256;

    /// Wraps `inner`. `unit_stride_alignment` is any positive byte count
    /// (rows are padded to the least multiple of it and the item size, as
    /// the seed's rule pads them); `base_alignment` a power of two (it is a
    /// pointer alignment).
    ///
    /// ```
    /// use devmm::{Aligned, DType, Device, LayoutPolicy, RowMajor};
    /// // 48-byte rows: float32 rows of 3 pad to 12 elements.
    /// let rows48 = Aligned::new(RowMajor, 48, 64)?.layout(&[2, 3], DType::FLOAT32, Device::CPU)?;
    /// assert_eq!(rows48.strides(), &[12, 1]);
    /// // Finer than an element: float64 rows pad to whole elements only.
    /// let fine = Aligned::new(RowMajor, 4, 1)?.layout(&[2, 3], DType::FLOAT64, Device::CPU)?;
    /// assert_eq!(fine.strides(), &[3, 1]);
    /// assert!(Aligned::new(RowMajor, 0, 64).is_err());
    /// assert!(Aligned::new(RowMajor, 48, 48).is_err());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn new(
        inner: impl LayoutPolicy,
        unit_stride_alignment: usize,
        base_alignment: usize,
    ) -> Result<Aligned> {
        Aligned::over(Arc::new(inner), unit_stride_alignment, base_alignment)
    }

    /// Wraps a shared policy.
    pub fn over(
        inner: Arc<dyn LayoutPolicy>,
        unit_stride_alignment: usize,
        base_alignment: usize,
    ) -> Result<Aligned> {
        if unit_stride_alignment == 0 {
            return Err(Error::layout(
                "alignments must be positive: unit_stride_alignment must be a positive byte count (1 for no padding), not 0",
            ));
        }
        if !base_alignment.is_power_of_two() {
            // The seed's words for 0, which it refuses as not positive.
            let zero = if base_alignment == 0 {
                "alignments must be positive: "
            } else {
                ""
            };
            return Err(Error::layout(format!(
                "{zero}base_alignment must be a power of two (1, 2, 4, ...), not {base_alignment}"
            )));
        }
        Ok(Aligned {
            inner,
            unit_stride_alignment,
            base_alignment,
        })
    }

    /// The wrapped policy.
    pub fn inner(&self) -> &Arc<dyn LayoutPolicy> {
        &self.inner
    }

    /// Row padding, in bytes.
    pub fn unit_stride_alignment(&self) -> usize {
        self.unit_stride_alignment
    }

    /// Base alignment, in bytes.
    pub fn base_alignment(&self) -> usize {
        self.base_alignment
    }
}

impl LayoutPolicy for Aligned {
    fn plan(&self, shape: &[usize], dtype: DType, device: Device) -> Result<LayoutPlan> {
        Ok(LayoutPlan {
            permutation: self.inner.plan(shape, dtype, device)?.permutation,
            unit_stride_alignment: self.unit_stride_alignment,
            base_alignment: self.base_alignment,
        })
    }

    fn base_alignment(&self) -> usize {
        self.base_alignment
    }

    fn unit_stride_alignment(&self) -> usize {
        self.unit_stride_alignment
    }
}

/// Row-major with the padding each device prefers: GPU memory gets rows
/// aligned to 128 bytes and a 256-byte base (what coalesced loads and
/// cudaMalloc give); host memory gets cache-line (64-byte) rows and base.
///
/// ```
/// use devmm::{DType, Device, DeviceOptimal, LayoutPolicy};
/// let gpu = DeviceOptimal.layout(&[2, 3], DType::FLOAT32, Device::cuda(0))?;
/// assert_eq!((gpu.strides(), gpu.base_alignment()), (&[32, 1][..], 256));
/// let cpu = DeviceOptimal.layout(&[2, 3], DType::FLOAT32, Device::CPU)?;
/// assert_eq!((cpu.strides(), cpu.base_alignment()), (&[16, 1][..], 64));
/// # Ok::<(), devmm::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceOptimal;

impl DeviceOptimal {
    /// GPU-resident memory (managed memory included: its demanding reader
    /// is the GPU): coalescing rows and the base the GPU allocators give.
    const GPU: (usize, usize) = (
        Aligned::DEFAULT_UNIT_STRIDE_ALIGNMENT,
        Aligned::DEFAULT_BASE_ALIGNMENT,
    );
    /// Host memory (pinned included): cache-line rows and base.
    const HOST: (usize, usize) = (64, 64);

    /// The plan for `ndim` dimensions on `device`: row-major, with the
    /// device's alignments.
    fn plan_on(ndim: usize, device: Device) -> LayoutPlan {
        let (unit_stride_alignment, base_alignment) = DeviceOptimal::alignments(device);
        LayoutPlan {
            permutation: row_major_order(ndim),
            unit_stride_alignment,
            base_alignment,
        }
    }

    /// The `(unit_stride_alignment, base_alignment)` used on `device`.
    pub const fn alignments(device: Device) -> (usize, usize) {
        match device.ty() {
            DeviceType::Cuda | DeviceType::Rocm | DeviceType::CudaManaged => DeviceOptimal::GPU,
            DeviceType::Cpu | DeviceType::CudaHost | DeviceType::RocmHost => DeviceOptimal::HOST,
        }
    }
}

impl LayoutPolicy for DeviceOptimal {
    fn plan(&self, shape: &[usize], _dtype: DType, device: Device) -> Result<LayoutPlan> {
        Ok(DeviceOptimal::plan_on(shape.len(), device))
    }

    /// The GPU's, the larger.
    fn base_alignment(&self) -> usize {
        DeviceOptimal::GPU.1
    }

    /// The GPU's, the larger.
    fn unit_stride_alignment(&self) -> usize {
        DeviceOptimal::GPU.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inline (from the constant) and past it (filled): the same orders.
    #[test]
    fn the_orders_list_every_dimension_at_every_rank() {
        for ndim in 0..=2 * super::super::INLINE_DIMS {
            let order: Vec<usize> = (0..ndim).collect();
            assert_eq!(row_major_order(ndim).as_slice(), order, "rank {ndim}");
            let reversed: Vec<usize> = (0..ndim).rev().collect();
            assert_eq!(col_major_order(ndim).as_slice(), reversed, "rank {ndim}");
        }
    }
}
