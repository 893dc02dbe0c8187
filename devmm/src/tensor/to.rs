//! [`Tensor::to`]: a copy of a tensor on a device, a stream and a layout
//! of the caller's choice. DLPack exports stay zero-copy; this is the
//! explicit copy their refusals point at.
//!
//! The copy walks the elements in runs: the innermost dimensions that are
//! dense, in the same order, in both layouts merge into one run, and each
//! run is one runtime copy. Equal dense layouts are one copy, a padded
//! [`Aligned`](crate::Aligned) layout one per row, and a change of memory
//! order (a transpose) one per element.

use std::sync::Arc;

use crate::buffer::BufferHold;
use crate::device::{Device, DeviceType};
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::ptr::DevicePtr;
use crate::resource::check_dereferenceable;
use crate::stream::Stream;
use crate::stream::StreamRuntime;

use super::{EmptyOptions, Tensor, empty};

/// Which memory a copy reads and writes, and so which runtime call moves a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    HostToHost,
    HostToDevice,
    DeviceToHost,
    /// Both sides on one GPU.
    OnDevice,
}

impl Route {
    /// The route from `from` to `to`, and the device whose stream orders
    /// the copy: the GPU side, or the CPU for a host copy. Only ordinary
    /// host memory and the GPUs' own device memory are copied; between two
    /// GPUs the data goes through the host (see the error).
    fn between(from: Device, to: Device) -> Result<(Route, Device)> {
        let gpu = |ty: DeviceType| matches!(ty, DeviceType::Cuda | DeviceType::Rocm);
        match (from.ty(), to.ty()) {
            (DeviceType::Cpu, DeviceType::Cpu) => Ok((Route::HostToHost, from)),
            (DeviceType::Cpu, ty) if gpu(ty) => Ok((Route::HostToDevice, to)),
            (ty, DeviceType::Cpu) if gpu(ty) => Ok((Route::DeviceToHost, from)),
            (ty, _) if gpu(ty) && from == to => Ok((Route::OnDevice, from)),
            (a, b) if gpu(a) && gpu(b) => Err(Error::CannotCopy {
                from,
                to,
                reason: format!(
                    "devmm copies between the host and one GPU, or within one GPU, not from \
                     one GPU to another; copy through the host: .to({}).to({to})",
                    Device::CPU
                ),
            }),
            _ => Err(Error::CannotCopy {
                from,
                to,
                reason: format!(
                    "devmm copies only ordinary host memory ({}) and CUDA or ROCm device \
                     memory; import the data into one of those first",
                    Device::CPU
                ),
            }),
        }
    }
}

impl Tensor {
    /// A copy of this tensor on `device`: a new tensor of the same shape
    /// and dtype, laid out as `layout` (this tensor's layout when `None`),
    /// allocated from `device`'s current resource
    /// ([`get_current_memory_resource`](crate::get_current_memory_resource))
    /// and writable even when this one is read-only.
    ///
    /// The copy is ordered on `stream`, a stream of [`copy_device`](Tensor::copy_device)
    /// (its default stream when `None`), after the work queued so far on
    /// this tensor's buffer stream; that stream then waits for the copy,
    /// so releasing this tensor never overtakes it. As rmm's copies: on a
    /// default stream the copy is finished when this returns, on another
    /// a copy between device memory is asynchronous (a copy that reads or
    /// writes host memory is always finished, so the host side may be
    /// dropped at once). The new buffer is allocated on `stream` when it
    /// is of `device`, else on `device`'s default stream.
    ///
    /// Refused: a pair of devices devmm does not copy between
    /// ([`Error::CannotCopy`], naming both), a stream of another device, a
    /// freed buffer ([`Error::BufferClosed`]), and a resource whose
    /// pointers are not real memory ([`Error::NotDereferenceable`]).
    ///
    /// ```
    /// use devmm::{empty, ColMajor, DType, Device, DeviceType, EmptyOptions, Error, LayoutPolicy, RowMajor};
    /// let mut src = empty(&[2, 3], DType::UINT8, &EmptyOptions::new().layout(RowMajor))?;
    /// for (i, slot) in src.as_mut_slice::<u8>()?.iter_mut().enumerate() {
    ///     slot.write(i as u8);
    /// }
    /// let fortran = ColMajor.layout(&[2, 3], DType::UINT8, Device::CPU)?;
    /// let col = src.to(Device::CPU, None, Some(fortran))?;
    /// assert_eq!(col.strides(), &[1, 2]);
    /// let back = col.to(Device::CPU, None, Some(src.layout().clone()))?;
    /// assert_ne!(back.data_ptr(), src.data_ptr());
    /// // SAFETY: the copies wrote every element.
    /// assert_eq!(&*unsafe { back.as_slice::<u8>() }?, &[0, 1, 2, 3, 4, 5]);
    ///
    /// let pinned = Device::new(DeviceType::CudaHost, 0);
    /// assert!(matches!(src.to(pinned, None, None), Err(Error::CannotCopy { .. })));
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn to(
        &self,
        device: Device,
        stream: Option<&Stream>,
        layout: Option<Layout>,
    ) -> Result<Tensor> {
        let from = self.device();
        let (route, side) = Route::between(from, device)?;
        let stream = match stream {
            Some(stream) => {
                stream.check_device(side)?;
                stream.clone()
            }
            None => crate::defaults::stream(side)?,
        };
        stream.check_usable_here("a tensor copy")?;
        if stream.is_capturing()? {
            // Refused before anything is allocated: the copy would be
            // refused midway, after allocating its result in the graph.
            return Err(Error::StreamCapture {
                device: stream.device(),
                operation: format!("copying a tensor from {from} to {device}"),
                reason: "the copy allocates its result, which a graph can only record as an \
                         allocation the graph itself must free; copy before the capture begins \
                         or after it ends, or on a stream that is not capturing"
                    .into(),
            });
        }
        let resource = crate::defaults::resource(device)?;
        check_dereferenceable(&*resource, "a tensor copy")?;
        check_dereferenceable(&**self.buffer().resource(), "a tensor copy")?;
        // A freed source is refused before anything is allocated, and
        // stays allocated until the copy is queued.
        let _hold = BufferHold::new(self.buffer())?;
        let allocation_stream = match stream.device() == device {
            true => stream.clone(),
            false => crate::defaults::stream(device)?,
        };
        let options = EmptyOptions::new()
            .device(device)
            .resource(Arc::clone(&resource) as Arc<_>)
            .stream(allocation_stream)
            .resolved_layout(layout.unwrap_or_else(|| self.layout().clone()));
        let copy = empty(self.shape(), self.dtype(), &options)?;
        if copy.numel() == 0 {
            return Ok(copy);
        }
        let source_stream = self.buffer().stream();
        let on_gpu_source = matches!(route, Route::DeviceToHost | Route::OnDevice);
        if on_gpu_source && *source_stream != stream {
            stream.wait(source_stream)?;
        }
        let runtime = stream.runtime_serving(side)?;
        for_each_run(self, &copy, |src, dst, nbytes| {
            // SAFETY: `for_each_run` hands out ranges inside the two
            // tensors' extents, which their buffers cover (checked when
            // each tensor was made); the source is held open, the copy is
            // a fresh allocation no one else reaches, so they are
            // disjoint, and both resources declared real memory.
            unsafe { copy_run(&**runtime, route, src, dst, nbytes, &stream) }
        })?;
        match route {
            // A host source may go as soon as this returns.
            Route::HostToHost | Route::HostToDevice => stream.synchronize()?,
            // Each run was waited for by the runtime.
            Route::DeviceToHost => {}
            Route::OnDevice => {
                if *source_stream != stream {
                    source_stream.wait(&stream)?;
                }
                crate::copy::finish_on_default(&stream)?;
            }
        }
        Ok(copy)
    }

    /// The device whose stream orders a copy of this tensor to `to`
    /// ([`to`](Tensor::to)'s `stream`): the GPU of a copy to or from the
    /// host or within a GPU, the CPU for a host copy. A pair devmm does not
    /// copy between is an [`Error::CannotCopy`].
    ///
    /// ```
    /// use devmm::{empty, DType, Device, EmptyOptions, Error};
    /// let t = empty(&[4], DType::FLOAT32, &EmptyOptions::new())?;
    /// assert_eq!(t.copy_device(Device::cuda(0))?, Device::cuda(0));
    /// assert_eq!(t.copy_device(Device::CPU)?, Device::CPU);
    /// let pinned = Device::new(devmm::DeviceType::CudaHost, 0);
    /// assert!(matches!(t.copy_device(pinned), Err(Error::CannotCopy { .. })));
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn copy_device(&self, to: Device) -> Result<Device> {
        Route::between(self.device(), to).map(|(_, side)| side)
    }
}

/// Copies one run of `nbytes` from `src` to `dst` on `stream`.
///
/// # Safety
///
/// `src` is valid for `nbytes` of reads and `dst` for as many writes, in
/// the memory `route` names, and the ranges are disjoint.
unsafe fn copy_run(
    runtime: &dyn StreamRuntime,
    route: Route,
    src: DevicePtr,
    dst: DevicePtr,
    nbytes: usize,
    stream: &Stream,
) -> Result<()> {
    match route {
        Route::HostToHost => {
            // SAFETY: the caller's contract, for two host ranges.
            unsafe { crate::copy_kind::host_to_host(dst, src, nbytes) };
            Ok(())
        }
        Route::HostToDevice => {
            // SAFETY: the caller's contract; the source is host memory only
            // read while the slice lives.
            let src = unsafe { std::slice::from_raw_parts(src.as_host_ptr::<u8>(), nbytes) };
            // SAFETY: the caller's contract, for the device range.
            unsafe { runtime.copy_host_to_device(dst, src, stream) }
        }
        Route::DeviceToHost => {
            // SAFETY: the caller's contract; the destination is fresh host
            // memory no other reference reaches while the slice lives.
            let dst = unsafe { std::slice::from_raw_parts_mut(dst.as_host_ptr::<u8>(), nbytes) };
            // SAFETY: the caller's contract, for the device range.
            unsafe { runtime.copy_device_to_host(dst, src, stream) }
        }
        // SAFETY: the caller's contract, for two ranges of one device.
        Route::OnDevice => unsafe { runtime.copy_device_to_device(dst, src, nbytes, stream) },
    }
}

/// Calls `copy(src, dst, nbytes)` for every run of elements that is dense
/// in both `src` and `dst` (same shape and item size): the innermost
/// dimensions, by `src`'s memory order, whose strides in both are the
/// extent of everything inside them merge into one run, and the other
/// dimensions are walked one index at a time.
fn for_each_run(
    src: &Tensor,
    dst: &Tensor,
    mut copy: impl FnMut(DevicePtr, DevicePtr, usize) -> Result<()>,
) -> Result<()> {
    let itemsize = src.layout().itemsize();
    let (shape, src_strides, dst_strides) = (src.shape(), src.strides(), dst.strides());
    // Innermost first; extents of one step nowhere and are left out.
    let mut dims: Vec<usize> = src.layout().permutation().iter().rev().copied().collect();
    dims.retain(|&d| shape[d] > 1);
    let mut run = 1usize;
    let mut merged = 0;
    for &d in &dims {
        if src_strides[d] != run || dst_strides[d] != run {
            break;
        }
        // No overflow: the run stays within the tensor's elements, whose
        // count fits (each layout's extent was checked when it was made).
        run *= shape[d];
        merged += 1;
    }
    let outer = &dims[merged..];
    let run_bytes = run * itemsize;
    let (src_base, dst_base) = (src.data_ptr().addr(), dst.data_ptr().addr());
    // An odometer over the outer dimensions, innermost fastest. Every
    // offset is inside a layout's extent, which fits the address space.
    let mut index = vec![0usize; outer.len()];
    loop {
        let (mut src_off, mut dst_off) = (0usize, 0usize);
        for (&d, &i) in outer.iter().zip(&index) {
            src_off += i * src_strides[d];
            dst_off += i * dst_strides[d];
        }
        copy(
            DevicePtr::from_addr(src_base + src_off * itemsize),
            DevicePtr::from_addr(dst_base + dst_off * itemsize),
            run_bytes,
        )?;
        let mut level = 0;
        loop {
            let Some(&d) = outer.get(level) else {
                return Ok(());
            };
            index[level] += 1;
            if index[level] < shape[d] {
                break;
            }
            index[level] = 0;
            level += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::layout::{Aligned, LayoutPolicy, Permuted, RowMajor};

    /// The runs a copy from `src` to `dst` layouts makes, as (src offset,
    /// dst offset, bytes) from each tensor's first element.
    fn runs(
        shape: &[usize],
        src: impl LayoutPolicy,
        dst: impl LayoutPolicy,
    ) -> Vec<(usize, usize, usize)> {
        let on = |p: Arc<dyn LayoutPolicy>| EmptyOptions::new().layout_shared(p);
        let a = empty(shape, DType::INT16, &on(Arc::new(src))).unwrap();
        let b = empty(shape, DType::INT16, &on(Arc::new(dst))).unwrap();
        let (a0, b0) = (a.data_ptr().addr(), b.data_ptr().addr());
        let mut seen = Vec::new();
        for_each_run(&a, &b, |s, d, n| {
            seen.push((s.addr() - a0, d.addr() - b0, n));
            Ok(())
        })
        .unwrap();
        seen
    }

    #[test]
    fn equal_dense_layouts_copy_in_one_run() {
        assert_eq!(runs(&[2, 3, 4], RowMajor, RowMajor), [(0, 0, 48)]);
        let nhwc = Permuted::new([0, 2, 1]);
        assert_eq!(runs(&[2, 3, 4], nhwc.clone(), nhwc), [(0, 0, 48)]);
    }

    #[test]
    fn padded_rows_copy_row_by_row() {
        let padded = Aligned::new(RowMajor, 16, 16).unwrap();
        // Rows of 3 int16 (6 bytes) padded to 16 bytes: 8 elements apart.
        assert_eq!(runs(&[2, 3], padded, RowMajor), [(0, 0, 6), (16, 6, 6)]);
    }

    #[test]
    fn a_transpose_copies_element_by_element() {
        let col = Permuted::new([1, 0]);
        // Source column-major (strides 1, 2): walked in its order, the
        // destination's row-major offsets jump.
        assert_eq!(
            runs(&[2, 2], col, RowMajor),
            [(0, 0, 2), (2, 4, 2), (4, 2, 2), (6, 6, 2)]
        );
    }
}
