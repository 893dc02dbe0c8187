//! Typed host views of a tensor: what a Rust user reads and writes of the
//! memory they allocated on a host-accessible device.
//!
//! Both views are checked against the tensor: the element type must be the
//! tensor's dtype, the device host-accessible (cpu, pinned host memory,
//! managed memory), the layout row-major and dense, the first element
//! aligned for `T`. On a GPU runtime's host-accessible memory, a view first
//! waits for the buffer's stream. The mutable view also needs the only handle to the
//! memory (no clone, no other tensor over the buffer, no live export) and a
//! writable tensor.

use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use crate::buffer::BufferHold;
use crate::device::DeviceType;
use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// A read view of a tensor's elements ([`Tensor::as_slice`]); derefs to
/// `&[T]`. It holds the buffer open: a [`DeviceBuffer::free`](crate::DeviceBuffer::free) while it
/// lives closes the buffer at once and returns the memory when it drops.
pub struct HostSlice<'a, T> {
    _hold: BufferHold<'a>,
    ptr: NonNull<T>,
    len: usize,
    _elements: PhantomData<&'a [T]>,
}

/// A write view of a tensor's elements ([`Tensor::as_mut_slice`]); derefs
/// to `&mut [MaybeUninit<T>]` and, like [`HostSlice`], holds the buffer
/// open so a `free` waits for it to drop.
pub struct HostSliceMut<'a, T> {
    hold: BufferHold<'a>,
    ptr: NonNull<MaybeUninit<T>>,
    len: usize,
    _elements: PhantomData<&'a mut [MaybeUninit<T>]>,
}

impl<T> Deref for HostSlice<'_, T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        // SAFETY: `as_slice` checked `ptr` holds `len` host-readable,
        // aligned elements of T; `_hold` keeps the memory allocated and the
        // borrow of the tensor keeps the buffer alive; the caller of
        // `as_slice` vouched for initialisation and no writers.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> Deref for HostSliceMut<'_, T> {
    type Target = [MaybeUninit<T>];

    fn deref(&self) -> &[MaybeUninit<T>] {
        // SAFETY: as in `deref_mut`, shared.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> DerefMut for HostSliceMut<'_, T> {
    fn deref_mut(&mut self) -> &mut [MaybeUninit<T>] {
        // SAFETY: `as_mut_slice` checked the extent as `as_slice` does and
        // that no other handle reaches the memory; the `&mut` borrow of the
        // tensor keeps it so and `hold` keeps the memory allocated;
        // `MaybeUninit` makes uninitialised elements sound.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for HostSlice<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T> std::fmt::Debug for HostSliceMut<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostSliceMut")
            .field("len", &self.len)
            .field("device", &self.hold.buffer().device())
            .finish()
    }
}

impl Tensor {
    /// The elements, in row-major order, as a guard that derefs to `&[T]`
    /// and holds the buffer open while it lives.
    ///
    /// ```
    /// use devmm::{empty, DType, EmptyOptions};
    /// let mut t = empty(&[2, 2], DType::INT32, &EmptyOptions::new())?;
    /// for (i, slot) in t.as_mut_slice::<i32>()?.iter_mut().enumerate() {
    ///     slot.write(i as i32 * 10);
    /// }
    /// // SAFETY: every element was written just above.
    /// assert_eq!(&*unsafe { t.as_slice::<i32>() }?, &[0, 10, 20, 30]);
    /// assert!(unsafe { t.as_slice::<f32>() }.is_err()); // not the dtype
    /// # Ok::<(), devmm::Error>(())
    /// ```
    ///
    /// Refused with [`Error::BufferClosed`] after [`DeviceBuffer::free`](crate::DeviceBuffer::free),
    /// and with [`Error::NotDereferenceable`] when the resource does not
    /// declare host-dereferenceable pointers. A `free` while the view
    /// lives closes the buffer and defers the release until it drops.
    ///
    /// # Safety
    ///
    /// Every element must be initialised (`empty` hands out uninitialised
    /// memory: write it first, through [`as_mut_slice`](Self::as_mut_slice),
    /// a copy, or a producer), and nothing may write it while the slice
    /// lives (a DLPack consumer or a raw pointer holder).
    pub unsafe fn as_slice<T: Element>(&self) -> Result<HostSlice<'_, T>> {
        let (ptr, len) = self.host_view::<T>()?;
        Ok(HostSlice {
            _hold: BufferHold::new(self.buffer())?,
            ptr: ptr.cast(),
            len,
            _elements: PhantomData,
        })
    }

    /// The elements, in row-major order, for writing; possibly
    /// uninitialised. The guard derefs to `&mut [MaybeUninit<T>]` and holds
    /// the buffer open while it lives.
    ///
    /// Refused while anything else can reach the memory: a clone of this
    /// tensor, another tensor or handle sharing its buffer, a live DLPack
    /// export; for read-only tensors; for memory adopted from outside devmm
    /// ([`DeviceBuffer::is_foreign`](crate::DeviceBuffer::is_foreign): a
    /// DLPack import's producer may still write it); for freed buffers and
    /// memory the host cannot dereference, as [`as_slice`](Self::as_slice).
    pub fn as_mut_slice<T: Element>(&mut self) -> Result<HostSliceMut<'_, T>> {
        let (ptr, len) = self.host_view::<T>()?;
        if self.is_read_only() {
            return Err(Error::InvalidArgument {
                reason: "the tensor is read-only; write through a writable tensor".into(),
            });
        }
        if self.buffer().is_foreign() {
            return Err(Error::InvalidArgument {
                reason: format!(
                    "the memory on {} was adopted from outside devmm ({}), whose owner may still \
                     write it; copy it into a devmm buffer to write it through a slice",
                    self.device(),
                    crate::resource::resource_chain(&**self.buffer().resource())
                ),
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
        Ok(HostSliceMut {
            hold: BufferHold::new(self.buffer())?,
            ptr: ptr.cast(),
            len,
            _elements: PhantomData,
        })
    }

    /// Waits until the host may touch the memory: every path in devmm that
    /// hands the host an address without a stream waits so (see
    /// `wait_for_host_on`); a caller that must not block where it makes
    /// such a view (the Python binding, which holds the GIL there) waits
    /// here first, after which the view's own wait finds nothing queued.
    ///
    /// ```
    /// use devmm::{DType, EmptyOptions, empty};
    /// let t = empty(&[4], DType::FLOAT32, &EmptyOptions::default())?;
    /// t.wait_for_host()?; // CPU memory: nothing to wait for
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn wait_for_host(&self) -> Result<()> {
        self.wait_for_host_on(self.device().ty())
    }

    /// Waits until the host may touch the memory, on a device of type `ty`
    /// (the tensor's, which the caller has at hand): memory a GPU runtime
    /// serves (pinned, managed) may still be written by work queued on the
    /// buffer's stream, or, from a stream-ordered pool, not yet allocated;
    /// the host reaches it once the stream has. CPU memory has no queued
    /// work. Every path that hands the host an address without a stream (a
    /// typed view, `__array_interface__`, the buffer protocol, a DLPack
    /// export asked for no stream) waits here.
    #[inline]
    pub(crate) fn wait_for_host_on(&self, ty: DeviceType) -> Result<()> {
        if ty == DeviceType::Cpu || !ty.is_host_accessible() {
            return Ok(());
        }
        self.wait_for_queued_work()
    }

    /// [`wait_for_host_on`](Self::wait_for_host_on) for memory a GPU
    /// runtime serves, out of the exports' inlined path.
    fn wait_for_queued_work(&self) -> Result<()> {
        let buffer = self.buffer();
        match buffer.resource().managed_memory() {
            // Managed memory the host may touch only on an idle device:
            // work on any stream makes it the GPU's.
            Some(managed) if managed.host_access_waits_for_device() => {
                buffer.stream().synchronize_device()
            }
            _ => buffer.stream().synchronize(),
        }
    }

    /// Checks the view and returns its start and length.
    fn host_view<T: Element>(&self) -> Result<(NonNull<u8>, usize)> {
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
        if !ty.is_host_accessible() {
            return Err(Error::InvalidArgument {
                reason: format!(
                    "the tensor lives on {}, which the host cannot read; copy it to a host buffer \
                     first (DeviceBuffer::copy_to_host)",
                    self.device()
                ),
            });
        }
        crate::resource::check_dereferenceable(&**self.buffer().resource(), "a typed host view")?;
        self.wait_for_host_on(ty)?;
        if !self.layout().is_c_contiguous() {
            return Err(Error::layout(format!(
                "a typed slice is row-major and dense, but the strides are {:?}; allocate with \
                 RowMajor or read the buffer's bytes",
                self.strides()
            )));
        }
        let len = self.numel();
        if len == 0 {
            return Ok((NonNull::<T>::dangling().cast(), 0));
        }
        let ptr = self.data_ptr();
        if !ptr.is_aligned(std::mem::align_of::<T>()) {
            return Err(Error::layout(format!(
                "the first element at {ptr} is not aligned for {}; read the buffer's bytes instead",
                T::DTYPE
            )));
        }
        NonNull::new(ptr.as_host_ptr::<u8>())
            .map(|start| (start, len))
            .ok_or_else(|| Error::layout(format!("the tensor's data is at {ptr}, a null pointer")))
    }
}
