//! cudarc interop (cargo feature `cudarc`): both arrows.
//!
//! - A cudarc stream used as a devmm [`Stream`]: [`stream_from_cudarc`].
//!   devmm allocates, frees and orders work on it like any CUDA stream.
//! - A devmm [`DeviceBuffer`] handed to cudarc code: [`CudarcBuffer`]
//!   implements cudarc's `DevicePtr` / `DevicePtrMut`, so cudarc kernels
//!   and copies read and write devmm memory in place.
//! - A cudarc `CudaSlice` held as a devmm buffer: [`buffer_from_cudarc`].
//!   The buffer owns the slice (foreign memory: cudarc frees it when the
//!   buffer goes) and is ordered on the slice's stream, so it exports
//!   through DLPack and views as tensors like any devmm allocation.
//!
//! Driver-API streams (`CUstream`) and runtime-API streams (`cudaStream_t`)
//! are the same handles, and both APIs use the device's primary context,
//! so no conversion is needed.
//!
//! ```no_run
//! use std::sync::Arc;
//! use cudarc::driver::{CudaContext, DevicePtr};
//! use devmm::runtime::cuda::interop::{stream_from_cudarc, CudarcBuffer};
//! use devmm::{DeviceBuffer, MemoryResource};
//!
//! let ctx = CudaContext::new(0).expect("a CUDA device");
//! let theirs = ctx.new_stream().expect("a stream");
//!
//! // cudarc -> devmm: allocate on cudarc's stream.
//! let stream = stream_from_cudarc(&theirs)?;
//! let mr = devmm::get_current_memory_resource(stream.device())?;
//! let buffer = DeviceBuffer::new(1024, mr, &stream)?;
//!
//! // devmm -> cudarc: the buffer as a cudarc device pointer.
//! let view = CudarcBuffer::new(&buffer, &theirs)?;
//! let (ptr, _sync) = view.device_ptr(&theirs);
//! assert_eq!(ptr, buffer.ptr().addr() as u64);
//! let mut bytes = vec![0u8; 1024];
//! theirs.memcpy_dtoh(&view, &mut bytes).expect("a copy");
//!
//! // cudarc memory -> devmm: the slice becomes a buffer that owns it.
//! let slice = theirs.alloc_zeros::<f32>(256).expect("cudarc memory");
//! let held = devmm::runtime::cuda::interop::buffer_from_cudarc(slice)?;
//! assert_eq!(held.nbytes(), 1024);
//! let tensor = devmm::Tensor::bytes_of(Arc::new(held))?;
//! # Ok::<(), devmm::Error>(())
//! ```

use std::fmt;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DeviceSlice, SyncOnDrop};

use crate::buffer::DeviceBuffer;
use crate::device::{Device, DeviceType};
use crate::error::{Error, Result};
use crate::stream::{Stream, StreamOps};

use super::CudaRuntime;

/// Stream operations for a cudarc stream: the CUDA runtime's, plus a
/// reference that keeps the cudarc stream alive while devmm uses it.
struct CudarcStreamOps {
    ops: Arc<dyn StreamOps>,
    _stream: Arc<CudaStream>,
}

impl fmt::Debug for CudarcStreamOps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudarcStreamOps").finish_non_exhaustive()
    }
}

impl StreamOps for CudarcStreamOps {
    fn synchronize(&self, device: Device, handle: usize) -> Result<()> {
        self.ops.synchronize(device, handle)
    }

    fn wait(&self, device: Device, consumer: usize, producer: usize) -> Result<()> {
        self.ops.wait(device, consumer, producer)
    }

    fn destroy(&self, _device: Device, _handle: usize) {
        // cudarc owns the stream and destroys it when its last Arc drops.
    }

    fn runtime(self: Arc<Self>) -> crate::Result<Arc<dyn crate::StreamRuntime>> {
        Arc::clone(&self.ops).runtime()
    }
}

/// The cudarc stream as a devmm stream on `cuda:<ordinal>`, through the
/// process-wide CUDA runtime. The devmm stream keeps the cudarc stream
/// alive; cudarc still owns and destroys it.
pub fn stream_from_cudarc(stream: &Arc<CudaStream>) -> Result<Stream> {
    let rt = CudaRuntime::load()?;
    let ordinal = u32::try_from(stream.context().ordinal()).unwrap_or(u32::MAX);
    let device = Device::try_new(DeviceType::Cuda, ordinal)?;
    rt.check(device)?;
    let ops = Arc::new(CudarcStreamOps {
        ops: rt.stream_ops()?,
        _stream: Arc::clone(stream),
    });
    Ok(Stream::borrowed(device, stream.cu_stream() as usize, ops))
}

/// A devmm buffer seen by cudarc as `u8` device memory, used on `stream`.
///
/// Creating it makes `stream` wait for the work queued so far on the
/// buffer's own stream (its allocation, copies); cudarc calls on other
/// streams are ordered after `stream` the same way, through cudarc events.
/// While the view lives the buffer stays allocated (a `free` is deferred,
/// as for a DLPack export), and dropping it orders the buffer's stream
/// after the view's, so the release never overtakes cudarc's work.
pub struct CudarcBuffer<'a> {
    buffer: &'a DeviceBuffer,
    stream: Arc<CudaStream>,
}

impl<'a> CudarcBuffer<'a> {
    /// Views `buffer` (CUDA device, pinned or managed memory) for cudarc
    /// work on `stream`.
    pub fn new(buffer: &'a DeviceBuffer, stream: &Arc<CudaStream>) -> Result<CudarcBuffer<'a>> {
        if buffer.device().ty().runtime_name() != "cuda" {
            return Err(Error::InvalidArgument {
                reason: format!(
                    "cudarc works on CUDA memory, not on {}; allocate the buffer on a cuda device",
                    buffer.device()
                ),
            });
        }
        let theirs = stream_from_cudarc(stream)?;
        if buffer.device().ty() == DeviceType::Cuda && theirs.device() != buffer.device() {
            return Err(Error::Stream {
                device: buffer.device(),
                reason: format!(
                    "the cudarc stream is on {}, the buffer on {}; use a stream of the buffer's device",
                    theirs.device(),
                    buffer.device()
                ),
            });
        }
        if buffer.stream().device() == theirs.device() {
            theirs.wait(buffer.stream())?;
        } else {
            buffer.stream().synchronize()?;
        }
        // Like a DLPack export: refused once the buffer is freed, and a
        // `free` while the view lives waits for the view to drop.
        buffer.acquire_export()?;
        Ok(CudarcBuffer {
            buffer,
            stream: Arc::clone(stream),
        })
    }

    /// Orders `stream` after this view's stream when they differ, as
    /// cudarc's pointer traits require.
    fn order(&self, stream: &CudaStream) {
        if stream.cu_stream() != self.stream.cu_stream() {
            stream.context().record_err(stream.join(&self.stream));
        }
    }
}

impl Drop for CudarcBuffer<'_> {
    /// Orders the buffer's own stream (where it is freed) after the cudarc
    /// work queued on the view's stream, then ends the view's hold.
    fn drop(&mut self) {
        let ordered = stream_from_cudarc(&self.stream).and_then(|theirs| {
            if theirs.device() == self.buffer.stream().device() {
                self.buffer.stream().wait(&theirs)
            } else {
                theirs.synchronize()
            }
        });
        if let Err(error) = ordered {
            tracing::error!(target: "devmm::cudarc", %error, "ordering the buffer after cudarc work failed; synchronizing");
            if let Err(error) = self.stream.synchronize() {
                tracing::error!(target: "devmm::cudarc", %error, "cudarc stream synchronize failed");
            }
        }
        self.buffer.release_export();
    }
}

impl fmt::Debug for CudarcBuffer<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudarcBuffer")
            .field("buffer", self.buffer)
            .finish_non_exhaustive()
    }
}

impl DeviceSlice<u8> for CudarcBuffer<'_> {
    fn len(&self) -> usize {
        self.buffer.nbytes()
    }

    fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }
}

impl DevicePtr<u8> for CudarcBuffer<'_> {
    fn device_ptr<'b>(&'b self, stream: &'b CudaStream) -> (u64, SyncOnDrop<'b>) {
        self.order(stream);
        (self.buffer.ptr().addr() as u64, SyncOnDrop::Record(None))
    }
}

impl DevicePtrMut<u8> for CudarcBuffer<'_> {
    fn device_ptr_mut<'b>(&'b mut self, stream: &'b CudaStream) -> (u64, SyncOnDrop<'b>) {
        self.order(stream);
        (self.buffer.ptr().addr() as u64, SyncOnDrop::Record(None))
    }
}

/// Holds a cudarc `CudaSlice` as a devmm buffer on the slice's stream:
/// foreign memory (counted in [`foreign_memory`](crate::foreign_memory)),
/// released by dropping the slice, after the last export, when the buffer goes.
pub fn buffer_from_cudarc<T: Send + 'static>(slice: CudaSlice<T>) -> Result<DeviceBuffer> {
    let stream = stream_from_cudarc(slice.stream())?;
    let nbytes = slice.num_bytes();
    // The address read on the slice's own stream; the sync record it
    // returns orders nothing new, as the buffer stays on that stream.
    let ptr = {
        let (addr, _record) = slice.device_ptr(slice.stream());
        crate::ptr::DevicePtr::from_addr(addr as usize)
    };
    let resource = crate::foreign::ForeignMemoryResource::new(
        stream.device(),
        "cudarc CudaSlice",
        move || drop(slice),
    );
    DeviceBuffer::adopt(ptr, nbytes, resource, &stream)
}
