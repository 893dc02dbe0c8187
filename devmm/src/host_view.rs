//! Typed host views of a tensor: what a Rust user reads and writes of the
//! memory they allocated on a host-accessible device.
//!
//! Both views are checked against the tensor: the element type must be the
//! tensor's dtype, the device host-accessible (cpu, pinned host memory,
//! managed memory), the layout row-major and dense, the first element
//! aligned for `T`. The mutable view also needs the only handle to the
//! memory (no clone, no other tensor over the buffer, no live export) and a
//! writable tensor.

use std::mem::MaybeUninit;

use crate::device::DeviceType;
use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

impl Tensor {
    /// The elements, in row-major order.
    ///
    /// ```
    /// use devmm::{empty, DType, EmptyOptions};
    /// let mut t = empty(&[2, 2], DType::INT32, &EmptyOptions::new())?;
    /// for (i, slot) in t.as_mut_slice::<i32>()?.iter_mut().enumerate() {
    ///     slot.write(i as i32 * 10);
    /// }
    /// // SAFETY: every element was written just above.
    /// assert_eq!(unsafe { t.as_slice::<i32>() }?, &[0, 10, 20, 30]);
    /// assert!(unsafe { t.as_slice::<f32>() }.is_err()); // not the dtype
    /// # Ok::<(), devmm::Error>(())
    /// ```
    ///
    /// # Safety
    ///
    /// Every element must be initialised (`empty` hands out uninitialised
    /// memory: write it first, through [`as_mut_slice`](Self::as_mut_slice),
    /// a copy, or a producer), and nothing may write it while the slice
    /// lives (a DLPack consumer or a raw pointer holder).
    pub unsafe fn as_slice<T: Element>(&self) -> Result<&[T]> {
        let (ptr, len) = self.host_view::<T>()?;
        // SAFETY: `host_view` checked the memory is host-accessible,
        // aligned for T and holds `len` dense elements of T's dtype; the
        // buffer outlives `&self`; the caller vouches for initialisation
        // and the absence of writers.
        Ok(unsafe { std::slice::from_raw_parts(ptr.cast::<T>(), len) })
    }

    /// The elements, in row-major order, for writing; possibly uninitialised.
    ///
    /// Refused while anything else can reach the memory: a clone of this
    /// tensor, another tensor or handle sharing its buffer, a live DLPack
    /// export; and for read-only tensors.
    pub fn as_mut_slice<T: Element>(&mut self) -> Result<&mut [MaybeUninit<T>]> {
        let (ptr, len) = self.host_view::<T>()?;
        if self.is_read_only() {
            return Err(Error::InvalidArgument {
                reason: "the tensor is read-only; write through a writable tensor".into(),
            });
        }
        if !self.is_sole_handle() || self.buffer().live_exports() > 0 {
            return Err(Error::InvalidArgument {
                reason: format!(
                    "a mutable view needs the only handle to the memory, but the buffer on {} is \
                     shared ({} live exports, or other tensors or clones over it); drop them first",
                    self.device(),
                    self.buffer().live_exports()
                ),
            });
        }
        // SAFETY: as in `as_slice` for the extent; no other handle can reach
        // the memory (checked above) and `&mut self` keeps it that way for
        // the borrow; `MaybeUninit` makes uninitialised elements sound.
        Ok(unsafe { std::slice::from_raw_parts_mut(ptr.cast::<MaybeUninit<T>>(), len) })
    }

    /// Checks the view and returns its start and length.
    fn host_view<T: Element>(&self) -> Result<(*mut u8, usize)> {
        if T::DTYPE != self.dtype() {
            return Err(Error::InvalidArgument {
                reason: format!(
                    "a view of {} was asked, but the tensor holds {}; view it as its own dtype",
                    T::DTYPE,
                    self.dtype()
                ),
            });
        }
        let ty = self.device().ty();
        if !(ty.is_host_accessible() || ty == DeviceType::CudaManaged) {
            return Err(Error::InvalidArgument {
                reason: format!(
                    "the tensor lives on {}, which the host cannot read; copy it to a host buffer \
                     first (DeviceBuffer::copy_to_host)",
                    self.device()
                ),
            });
        }
        if !self.layout().is_c_contiguous() {
            return Err(Error::layout(format!(
                "a typed slice is row-major and dense, but the strides are {:?}; allocate with \
                 RowMajor or read the buffer's bytes",
                self.strides()
            )));
        }
        let len = self.numel();
        if len == 0 {
            return Ok((std::ptr::NonNull::<T>::dangling().as_ptr().cast(), 0));
        }
        let ptr = self.data_ptr();
        if !ptr.is_aligned(std::mem::align_of::<T>()) {
            return Err(Error::layout(format!(
                "the first element at {ptr} is not aligned for {}; read the buffer's bytes instead",
                T::DTYPE
            )));
        }
        Ok((ptr.as_host_ptr::<u8>(), len))
    }
}
