//! `DeviceBuffer`: one owning, stream-ordered allocation.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::device::Device;
use crate::error::{Error, Result};
use crate::ptr::DevicePtr;
use crate::resource::MemoryResource;
use crate::stream::Stream;

#[derive(Debug, Default)]
struct BufferState {
    /// `free` was called: no new exports, no copies.
    closed: bool,
    /// The memory went back to the resource.
    released: bool,
    /// Live DLPack exports; while non-zero, release waits for the last one.
    exports: usize,
    /// The stream `free` named, kept for a deferred release.
    free_stream: Option<Stream>,
}

/// An allocation that owns its memory and keeps its resource alive.
///
/// Freed on drop, ordered on the stream it was allocated on; [`free`](Self::free)
/// releases it earlier on a stream of your choice and is idempotent. A
/// buffer with live DLPack exports defers the release to the last export's
/// deleter, so memory a consumer holds is never freed under it.
///
/// ```
/// use std::sync::Arc;
/// use devmm::{DeviceBuffer, MallocMemoryResource, Stream};
/// let stream = Stream::cpu();
/// let buf = DeviceBuffer::new(5, Arc::new(MallocMemoryResource::new()), &stream)?;
/// buf.copy_from_host(b"abc")?;
/// let mut back = [0u8; 3];
/// buf.copy_to_host(&mut back)?;
/// assert_eq!(&back, b"abc");
/// buf.free(&stream)?;
/// buf.free(&stream)?; // idempotent
/// assert!(buf.is_closed());
/// # Ok::<(), devmm::Error>(())
/// ```
pub struct DeviceBuffer {
    ptr: DevicePtr,
    nbytes: usize,
    resource: Arc<dyn MemoryResource>,
    stream: Stream,
    state: Mutex<BufferState>,
}

impl DeviceBuffer {
    /// Allocates `nbytes` from `resource`, ordered on `stream`.
    pub fn new(nbytes: usize, resource: Arc<dyn MemoryResource>, stream: &Stream) -> Result<Self> {
        let ptr = resource.allocate(nbytes, stream)?;
        Ok(DeviceBuffer {
            ptr,
            nbytes,
            resource,
            stream: stream.clone(),
            state: Mutex::default(),
        })
    }

    /// Allocates `nbytes` on `device` from its current resource
    /// ([`get_current_memory_resource`](crate::get_current_memory_resource))
    /// on the device's default stream.
    ///
    /// ```
    /// let buf = devmm::DeviceBuffer::on_device(64, devmm::Device::CPU)?;
    /// assert_eq!(buf.nbytes(), 64);
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn on_device(nbytes: usize, device: Device) -> Result<Self> {
        let resource = crate::registry::get_current_memory_resource(device)?;
        let stream = crate::runtime::runtime_for(device)?.default_stream(device)?;
        DeviceBuffer::new(nbytes, resource, &stream)
    }

    /// The address of the allocation (null for zero bytes).
    pub fn ptr(&self) -> DevicePtr {
        self.ptr
    }

    /// The size asked for.
    pub fn nbytes(&self) -> usize {
        self.nbytes
    }

    /// The device the memory lives on.
    pub fn device(&self) -> Device {
        self.resource.device()
    }

    /// The stream the buffer was allocated on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// The resource that owns the memory.
    pub fn resource(&self) -> &Arc<dyn MemoryResource> {
        &self.resource
    }

    /// Whether [`free`](Self::free) was called.
    pub fn is_closed(&self) -> bool {
        self.state().closed
    }

    /// The number of DLPack exports not yet deleted.
    pub fn live_exports(&self) -> usize {
        self.state().exports
    }

    fn state(&self) -> MutexGuard<'_, BufferState> {
        // Every update under the lock is a few plain stores; a panic cannot
        // leave it half-done, so a poisoned lock is still consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Frees the memory, ordered on `stream`. Idempotent: later calls do
    /// nothing. With live exports the buffer closes now and the memory goes
    /// back when the last export is deleted.
    pub fn free(&self, stream: &Stream) -> Result<()> {
        let mut state = self.state();
        if state.closed {
            return Ok(());
        }
        state.closed = true;
        if state.exports > 0 {
            state.free_stream = Some(stream.clone());
            return Ok(());
        }
        self.release(&mut state, stream)
    }

    fn release(&self, state: &mut BufferState, stream: &Stream) -> Result<()> {
        if state.released {
            return Ok(());
        }
        state.released = true;
        // SAFETY: `ptr` came from `resource.allocate(nbytes, ..)` in `new`,
        // and `released` guarantees this runs once.
        unsafe { self.resource.deallocate(self.ptr, self.nbytes, stream) }
    }

    /// Registers a DLPack export, refused once the buffer is closed.
    pub(crate) fn acquire_export(&self) -> Result<()> {
        let mut state = self.state();
        if state.closed {
            return Err(self.closed_error());
        }
        state.exports += 1;
        Ok(())
    }

    /// Ends a DLPack export; the last one of a closed buffer releases it.
    pub(crate) fn release_export(&self) {
        let mut state = self.state();
        state.exports = state.exports.saturating_sub(1);
        if state.closed && state.exports == 0 {
            let stream = state
                .free_stream
                .take()
                .unwrap_or_else(|| self.stream.clone());
            if let Err(error) = self.release(&mut state, &stream) {
                tracing::error!(target: "devmm::buffer", %error, "deferred release failed");
            }
        }
    }

    fn closed_error(&self) -> Error {
        Error::BufferClosed {
            device: self.device(),
            nbytes: self.nbytes,
        }
    }

    fn check_copy(&self, len: usize) -> Result<()> {
        if self.state().closed {
            return Err(self.closed_error());
        }
        if len > self.nbytes {
            return Err(Error::InvalidArgument {
                reason: format!(
                    "copy of {len} bytes does not fit a buffer of {} bytes on {}",
                    self.nbytes,
                    self.device()
                ),
            });
        }
        Ok(())
    }

    /// Copies `src` to the start of the buffer through the runtime's memcpy.
    pub fn copy_from_host(&self, src: &[u8]) -> Result<()> {
        self.check_copy(src.len())?;
        if src.is_empty() {
            return Ok(());
        }
        let runtime = crate::runtime::runtime_for(self.device())?;
        // SAFETY: the buffer is open and at least `src.len()` bytes long.
        unsafe { runtime.copy_host_to_device(self.ptr, src, &self.stream) }
    }

    /// Copies the start of the buffer into `dst` and waits for it.
    pub fn copy_to_host(&self, dst: &mut [u8]) -> Result<()> {
        self.check_copy(dst.len())?;
        if dst.is_empty() {
            return Ok(());
        }
        let runtime = crate::runtime::runtime_for(self.device())?;
        // SAFETY: the buffer is open and at least `dst.len()` bytes long.
        unsafe { runtime.copy_device_to_host(dst, self.ptr, &self.stream) }
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        let mut state = std::mem::take(self.state.get_mut().unwrap_or_else(|e| e.into_inner()));
        if let Err(error) = self.release(&mut state, &self.stream) {
            tracing::error!(target: "devmm::buffer", %error, "release on drop failed");
        }
    }
}

impl fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state();
        f.debug_struct("DeviceBuffer")
            .field("ptr", &self.ptr)
            .field("nbytes", &self.nbytes)
            .field("device", &self.device())
            .field("closed", &state.closed)
            .field("exports", &state.exports)
            .finish()
    }
}
