//! `Tensor` and `empty`: typed, shaped views over a shared `DeviceBuffer`.

mod to;

use std::fmt;
use std::sync::{Arc, OnceLock};

use crate::buffer::DeviceBuffer;
use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::{Layout, LayoutPolicy, Permuted, RowMajor};
use crate::ptr::DevicePtr;
use crate::resource::MemoryResource;
use crate::size::checked_add;
use crate::stream::Stream;

struct TensorInner {
    buffer: Arc<DeviceBuffer>,
    dtype: DType,
    layout: Layout,
    byte_offset: usize,
    read_only: bool,
}

/// A dtype, a layout and an offset over a shared [`DeviceBuffer`].
///
/// Not an array: no arithmetic, no indexing. It is what devmm hands out
/// and exports through DLPack. Cloning shares the buffer.
///
/// ```
/// use devmm::{empty, DType, EmptyOptions, RowMajor};
/// let t = empty(&[2, 3], DType::FLOAT32, &EmptyOptions::new().layout(RowMajor))?;
/// assert_eq!((t.shape(), t.strides()), (&[2, 3][..], &[3, 1][..]));
/// assert_eq!(t.device(), devmm::Device::CPU);
/// t.buffer().free(t.buffer().stream())?;
/// assert!(t.buffer().is_closed());
/// # Ok::<(), devmm::Error>(())
/// ```
#[derive(Clone)]
pub struct Tensor {
    inner: Arc<TensorInner>,
}

impl Tensor {
    /// A tensor over `buffer`, checked: the layout's bytes from `byte_offset`
    /// must fit the buffer, and the first element must meet the layout's
    /// base alignment.
    pub fn from_buffer(
        buffer: Arc<DeviceBuffer>,
        dtype: DType,
        layout: Layout,
        byte_offset: usize,
    ) -> Result<Tensor> {
        if layout.itemsize() != dtype.itemsize() {
            return Err(Error::layout(format!(
                "the layout has {}-byte elements but {dtype} has {}",
                layout.itemsize(),
                dtype.itemsize()
            )));
        }
        let end = checked_add(byte_offset, layout.required_nbytes(), "tensor extent")?;
        if end > buffer.nbytes() {
            return Err(Error::layout(format!(
                "the layout needs {} bytes from offset {byte_offset}, but the buffer has {}",
                layout.required_nbytes(),
                buffer.nbytes()
            )));
        }
        let data = buffer.ptr().offset(byte_offset);
        if layout.required_nbytes() > 0
            && !data.is_some_and(|p| p.is_aligned(layout.base_alignment()))
        {
            return Err(Error::layout(format!(
                "the first element at {} + {byte_offset} is not aligned to the layout's {} bytes",
                buffer.ptr(),
                layout.base_alignment()
            )));
        }
        // A tensor over read-only memory is read-only: no view writes it.
        let read_only = buffer.is_read_only();
        Ok(Tensor {
            inner: Arc::new(TensorInner {
                buffer,
                dtype,
                layout,
                byte_offset,
                read_only,
            }),
        })
    }

    /// A tensor over `buffer` as `shape` of `dtype` laid out as `layout`,
    /// its first element `offset` elements (of `dtype`) into the buffer:
    /// the layout must be for that shape and dtype, and the rest is checked
    /// as [`from_buffer`](Tensor::from_buffer) checks it.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use devmm::{DType, Device, DeviceBuffer, Layout, Tensor};
    /// let buf = Arc::new(DeviceBuffer::on_device(16, Device::CPU)?);
    /// let layout = Layout::new(&[2], &[1], DType::FLOAT32, 4)?;
    /// let t = Tensor::view_of(buf.clone(), DType::FLOAT32, &[2], layout.clone(), 2)?;
    /// assert_eq!((t.byte_offset(), t.offset()), (8, Some(2)));
    /// assert!(Tensor::view_of(buf.clone(), DType::FLOAT32, &[3], layout.clone(), 0).is_err());
    /// assert!(Tensor::view_of(buf, DType::FLOAT32, &[2], layout, usize::MAX).is_err());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn view_of(
        buffer: Arc<DeviceBuffer>,
        dtype: DType,
        shape: &[usize],
        layout: Layout,
        offset: usize,
    ) -> Result<Tensor> {
        layout.validate_for(Some(shape), Some(dtype.itemsize()))?;
        let byte_offset = offset.checked_mul(dtype.itemsize()).ok_or_else(|| {
            let (nbytes, held) = (buffer.nbytes(), buffer.nbytes() / dtype.itemsize());
            let range = format!(
                "an element count from 0 to {held} (the {nbytes}-byte buffer holds {held} {dtype})"
            );
            Error::out_of_range("offset", offset as i128, &range)
        })?;
        Tensor::from_buffer(buffer, dtype, layout, byte_offset)
    }

    /// The whole buffer as a 1-D `uint8` tensor, the way `DeviceBuffer`
    /// exports itself (DLPack, the array interfaces).
    ///
    /// ```
    /// let buf = std::sync::Arc::new(devmm::DeviceBuffer::on_device(6, devmm::Device::CPU)?);
    /// let bytes = devmm::Tensor::bytes_of(buf.clone())?;
    /// assert_eq!((bytes.shape(), bytes.dtype()), (&[6][..], devmm::DType::UINT8));
    /// assert_eq!(bytes.data_ptr(), buf.ptr());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn bytes_of(buffer: Arc<DeviceBuffer>) -> Result<Tensor> {
        let layout = Layout::new(&[buffer.nbytes()], &[1], DType::UINT8, 1)?;
        Tensor::from_buffer(buffer, DType::UINT8, layout, 0)
    }

    /// The same memory, flagged read-only (DLPack exports carry the flag).
    pub fn to_read_only(&self) -> Tensor {
        Tensor {
            inner: Arc::new(TensorInner {
                buffer: Arc::clone(&self.inner.buffer),
                dtype: self.inner.dtype,
                layout: self.inner.layout.clone(),
                byte_offset: self.inner.byte_offset,
                read_only: true,
            }),
        }
    }

    /// The buffer the tensor views.
    pub fn buffer(&self) -> &Arc<DeviceBuffer> {
        &self.inner.buffer
    }

    /// Whether another handle shares this tensor: a clone, or a DLPack
    /// export a consumer still holds. (Bindings ask before they report the
    /// references a tensor holds to a garbage collector.)
    ///
    /// ```
    /// let t = devmm::empty(&[4], devmm::DType::UINT8, &devmm::EmptyOptions::new())?;
    /// assert!(!t.is_shared());
    /// let clone = t.clone();
    /// assert!(t.is_shared());
    /// drop(clone);
    /// assert!(!t.is_shared());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn is_shared(&self) -> bool {
        Arc::strong_count(&self.inner) > 1
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.inner.dtype
    }

    /// The layout (shape, strides, provenance).
    pub fn layout(&self) -> &Layout {
        &self.inner.layout
    }

    /// Extents.
    pub fn shape(&self) -> &[usize] {
        self.inner.layout.shape()
    }

    /// Strides in elements.
    pub fn strides(&self) -> &[usize] {
        self.inner.layout.strides()
    }

    /// The order of the dimensions in memory, as [`Permuted::of_strides`]
    /// reads it from the strides (`None` for row-major): what
    /// [`empty_like`] keeps.
    ///
    /// ```
    /// use devmm::{empty, ColMajor, DType, EmptyOptions, Permuted};
    /// let t = empty(&[2, 3], DType::FLOAT32, &EmptyOptions::new().layout(ColMajor))?;
    /// assert_eq!(t.memory_order(), Some(Permuted::new([1, 0])));
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn memory_order(&self) -> Option<Permuted> {
        // Strides in elements of a valid layout fit an isize (the span fits
        // the address space); saturating keeps the order regardless.
        let strides: smallvec::SmallVec<[isize; 4]> = self
            .strides()
            .iter()
            .map(|&s| isize::try_from(s).unwrap_or(isize::MAX))
            .collect();
        Permuted::of_strides(self.shape(), &strides)
    }

    /// The device of the buffer.
    pub fn device(&self) -> Device {
        self.inner.buffer.device()
    }

    /// Bytes from the buffer's start to the first element.
    pub fn byte_offset(&self) -> usize {
        self.inner.byte_offset
    }

    /// The first element's address: null when the tensor has no elements.
    pub fn data_ptr(&self) -> DevicePtr {
        if self.inner.layout.required_nbytes() == 0 {
            return DevicePtr::NULL;
        }
        // In range: checked against the buffer in `from_buffer`.
        DevicePtr::from_addr(self.inner.buffer.ptr().addr() + self.inner.byte_offset)
    }

    /// Whether consumers must not write.
    pub fn is_read_only(&self) -> bool {
        self.inner.read_only
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.inner.layout.numel()
    }

    /// Whether this handle is the only way to the memory: no clone, and no
    /// other tensor or handle over the buffer.
    pub(crate) fn is_sole_handle(&self) -> bool {
        Arc::strong_count(&self.inner) == 1 && Arc::strong_count(&self.inner.buffer) == 1
    }

    /// The first element's offset from the buffer's start, in elements:
    /// `None` when [`byte_offset`](Tensor::byte_offset) is not a whole
    /// number of elements (an over-aligned base under a 12-byte vector type).
    ///
    /// ```
    /// use devmm::{empty, DType, EmptyOptions};
    /// let t = empty(&[4], DType::FLOAT32, &EmptyOptions::new())?;
    /// assert_eq!(t.offset(), Some(0));
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn offset(&self) -> Option<usize> {
        let itemsize = self.inner.layout.itemsize();
        let bytes = self.inner.byte_offset;
        bytes.is_multiple_of(itemsize).then(|| bytes / itemsize)
    }

    /// [`offset`](Tensor::offset), or why there is none: what a caller
    /// that must report an offset in elements refuses with, an
    /// [`Error::Refused`] whose text is the whole message.
    ///
    /// ```
    /// use devmm::{empty, DType, EmptyOptions};
    /// let t = empty(&[4], DType::FLOAT32, &EmptyOptions::new())?;
    /// assert_eq!(t.checked_offset()?, 0);
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn checked_offset(&self) -> Result<usize> {
        let (byte_offset, itemsize) = (self.inner.byte_offset, self.inner.layout.itemsize());
        self.offset().ok_or_else(|| Error::Refused {
            reason: format!(
                "the first element is {byte_offset} bytes in, not a whole number of \
                 {itemsize}-byte elements; read byte_offset"
            ),
        })
    }
}

impl fmt::Display for Tensor {
    /// The seed's form: `Tensor(shape=(2, 3), dtype=float32, device=cpu:0,
    /// offset=0, read_only=False)`, the shape as a Python tuple and the
    /// offset in elements (in bytes, as `byte_offset=`, when it is not a
    /// whole number of them).
    ///
    /// ```
    /// use devmm::{empty, DType, EmptyOptions};
    /// let t = empty(&[4], DType::FLOAT32, &EmptyOptions::new())?;
    /// assert_eq!(
    ///     t.to_string(),
    ///     "Tensor(shape=(4,), dtype=float32, device=cpu:0, offset=0, read_only=False)"
    /// );
    /// # Ok::<(), devmm::Error>(())
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Tensor(shape=(")?;
        for (i, extent) in self.shape().iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{extent}")?;
        }
        if self.shape().len() == 1 {
            f.write_str(",")?;
        }
        write!(f, "), dtype={}, device={}, ", self.dtype(), self.device())?;
        match self.offset() {
            Some(elements) => write!(f, "offset={elements}")?,
            None => write!(f, "byte_offset={}", self.byte_offset())?,
        }
        let read_only = if self.is_read_only() { "True" } else { "False" };
        write!(f, ", read_only={read_only})")
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tensor")
            .field("shape", &self.shape())
            .field("strides", &self.strides())
            .field("dtype", &self.dtype())
            .field("device", &self.device())
            .field("read_only", &self.is_read_only())
            .finish()
    }
}

/// Where and how [`empty`] allocates. Everything is optional: the layout
/// defaults to [`RowMajor`], the device to [`default_device`](crate::default_device)
/// (or the resource's), the resource to the registry's current one, the
/// stream to the device's default.
///
/// ```
/// use std::sync::Arc;
/// use devmm::{Aligned, EmptyOptions, MallocMemoryResource, RowMajor, Device};
/// let opts = EmptyOptions::new()
///     .layout(Aligned::new(RowMajor, 128, 256)?)
///     .device(Device::CPU)
///     .resource(Arc::new(MallocMemoryResource::new()));
/// # Ok::<(), devmm::Error>(())
/// ```
#[derive(Clone, Default)]
pub struct EmptyOptions {
    layout: Option<LayoutChoice>,
    device: Option<Device>,
    resource: Option<Arc<dyn MemoryResource>>,
    stream: Option<Stream>,
}

impl EmptyOptions {
    /// All defaults.
    pub fn new() -> EmptyOptions {
        EmptyOptions::default()
    }

    /// Lays the tensor out with `policy`.
    pub fn layout(self, policy: impl LayoutPolicy) -> EmptyOptions {
        self.layout_shared(Arc::new(policy))
    }

    /// Lays the tensor out with a shared policy (kept as the layout's provenance).
    pub fn layout_shared(mut self, policy: Arc<dyn LayoutPolicy>) -> EmptyOptions {
        self.layout = Some(LayoutChoice::Policy(policy));
        self
    }

    /// Lays the tensor out exactly as `layout`, already resolved; [`empty`]
    /// checks it is for the shape and dtype asked for.
    ///
    /// ```
    /// use devmm::{empty, DType, Device, EmptyOptions, LayoutPolicy, ColMajor};
    /// let layout = ColMajor.layout(&[2, 3], DType::FLOAT32, Device::CPU)?;
    /// let t = empty(&[2, 3], DType::FLOAT32, &EmptyOptions::new().resolved_layout(layout.clone()))?;
    /// assert_eq!(t.strides(), &[1, 2]);
    /// assert!(empty(&[3, 2], DType::FLOAT32, &EmptyOptions::new().resolved_layout(layout)).is_err());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn resolved_layout(mut self, layout: Layout) -> EmptyOptions {
        self.layout = Some(LayoutChoice::Resolved(Box::new(layout)));
        self
    }

    /// Allocates on `device`.
    pub fn device(mut self, device: Device) -> EmptyOptions {
        self.device = Some(device);
        self
    }

    /// Allocates from `resource` instead of the registry's current one.
    pub fn resource(mut self, resource: Arc<dyn MemoryResource>) -> EmptyOptions {
        self.resource = Some(resource);
        self
    }

    /// Orders the allocation on `stream`.
    pub fn stream(mut self, stream: Stream) -> EmptyOptions {
        self.stream = Some(stream);
        self
    }

    /// The device [`empty`] allocates on with these options: the device
    /// option, else the resource's, else the
    /// [`default_device`](crate::default_device). A device and a resource
    /// of another device are an [`Error::InvalidArgument`].
    ///
    /// ```
    /// use std::sync::Arc;
    /// use devmm::{Device, EmptyOptions, MallocMemoryResource};
    /// let malloc = EmptyOptions::new().resource(Arc::new(MallocMemoryResource::new()));
    /// assert_eq!(malloc.target_device()?, Device::CPU);
    /// assert!(malloc.device(Device::cuda(0)).target_device().is_err());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn target_device(&self) -> Result<Device> {
        match (self.device, &self.resource) {
            (asked, Some(mr)) => crate::resource::device_for(&**mr, asked),
            (Some(device), None) => Ok(device),
            (None, None) => crate::defaults::device(),
        }
    }

    /// Completes these options as [`empty_like`] does for an array on
    /// `device` laid out in `order` (as [`Permuted::of_strides`] reads it
    /// from the array's strides; `None` for row-major or unknown): that
    /// device unless a device or a resource is named, that order unless a
    /// layout is. Returns the order it applied, if any.
    ///
    /// ```
    /// use devmm::{Device, EmptyOptions, Permuted, RowMajor};
    /// let order = Permuted::of_strides(&[2, 3], &[1, 2]);
    /// let (options, kept) = EmptyOptions::new().imitating(Device::CPU, order.clone());
    /// assert_eq!((options.target_device()?, kept), (Device::CPU, order.clone()));
    /// let (_, kept) = EmptyOptions::new().layout(RowMajor).imitating(Device::CPU, order);
    /// assert_eq!(kept, None);
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn imitating(
        mut self,
        device: Device,
        order: Option<Permuted>,
    ) -> (EmptyOptions, Option<Permuted>) {
        if self.device.is_none() && self.resource.is_none() {
            self.device = Some(device);
        }
        let kept = order.filter(|_| self.layout.is_none());
        if let Some(order) = &kept {
            self = self.layout(order.clone());
        }
        (self, kept)
    }
}

impl fmt::Debug for EmptyOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmptyOptions")
            .field("layout", &self.layout)
            .field("device", &self.device)
            .field("resource", &self.resource)
            .field("stream", &self.stream)
            .finish()
    }
}

/// How the tensor is laid out: by a policy, or by a layout resolved already
/// (boxed: a layout holds eight dimensions inline, and options move by value).
#[derive(Clone, Debug)]
enum LayoutChoice {
    Policy(Arc<dyn LayoutPolicy>),
    /// Boxed: a layout is large, and the options move by value through
    /// every builder call, which the common policy case should not pay for.
    Resolved(Box<Layout>),
}

fn row_major() -> &'static Arc<dyn LayoutPolicy> {
    static ROW_MAJOR: OnceLock<Arc<dyn LayoutPolicy>> = OnceLock::new();
    ROW_MAJOR.get_or_init(|| Arc::new(RowMajor))
}

/// Allocates an uninitialised tensor: policy → layout → resource → buffer → tensor.
///
/// When the layout's base alignment exceeds what the resource guarantees,
/// the buffer is over-allocated by the difference and the tensor starts at
/// the first aligned address inside it.
///
/// ```
/// use devmm::{empty, Aligned, DType, EmptyOptions, RowMajor};
/// let padded = empty(&[4, 3], DType::FLOAT32, &EmptyOptions::new().layout(Aligned::new(RowMajor, 128, 256)?))?;
/// assert_eq!(padded.strides(), &[32, 1]);
/// assert!(padded.data_ptr().is_aligned(256));
/// # Ok::<(), devmm::Error>(())
/// ```
pub fn empty(shape: &[usize], dtype: DType, options: &EmptyOptions) -> Result<Tensor> {
    let device = options.target_device()?;
    let layout = match &options.layout {
        Some(LayoutChoice::Resolved(layout)) => {
            layout.validate_for(Some(shape), Some(crate::layout::element_size(dtype)?))?;
            Layout::clone(layout)
        }
        Some(LayoutChoice::Policy(policy)) => Layout::resolve(policy, shape, dtype, device)?,
        None => Layout::resolve(row_major(), shape, dtype, device)?,
    };
    let resource = match &options.resource {
        Some(mr) => Arc::clone(mr),
        None => crate::defaults::resource(device)?,
    };
    let stream = match &options.stream {
        Some(stream) => stream.clone(),
        None => crate::defaults::stream(device)?,
    };
    // A layout may ask less than its elements' natural alignment (the dense
    // policies ask none, as the seed's do); the tensor still starts on it.
    let base = layout.base_alignment().max(dtype.alignment());
    let slack = if layout.required_nbytes() > 0 && base > resource.guaranteed_alignment() {
        base - resource.guaranteed_alignment()
    } else {
        0
    };
    let nbytes = checked_add(layout.required_nbytes(), slack, "allocation size")?;
    let buffer = Arc::new(DeviceBuffer::new(nbytes, resource, &stream)?);
    let addr = buffer.ptr().addr();
    let byte_offset = if slack == 0 {
        0
    } else {
        addr.next_multiple_of(base) - addr
    };
    Tensor::from_buffer(buffer, dtype, layout, byte_offset)
}

/// A new tensor with `other`'s shape, dtype and device, and its memory
/// order (a Fortran-order `other` gives a Fortran-order result) unless
/// `options` names a layout; the rest from `options`.
///
/// ```
/// use devmm::{empty, empty_like, ColMajor, DType, EmptyOptions};
/// let a = empty(&[2, 3], DType::INT32, &EmptyOptions::new().layout(ColMajor))?;
/// let b = empty_like(&a, &EmptyOptions::new())?;
/// assert_eq!((b.shape(), b.strides(), b.dtype()), (&[2, 3][..], &[1, 2][..], DType::INT32));
/// assert_ne!(a.data_ptr(), b.data_ptr());
/// # Ok::<(), devmm::Error>(())
/// ```
pub fn empty_like(other: &Tensor, options: &EmptyOptions) -> Result<Tensor> {
    let order = other.memory_order();
    let (options, _) = options.clone().imitating(other.device(), order);
    empty(other.shape(), other.dtype(), &options)
}
