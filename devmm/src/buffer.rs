//! `DeviceBuffer`: one owning, stream-ordered allocation.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::device::Device;
use crate::error::{Error, MisuseKind, Result};
use crate::ptr::DevicePtr;
use crate::resource::MemoryResource;
use crate::stream::Stream;

/// What only the slow paths (`free`, the release after it) touch; the
/// export count and the closed mark live in [`DeviceBuffer::exports`].
#[derive(Debug, Default)]
struct BufferState {
    /// The memory went back to the resource.
    released: bool,
    /// The stream `free` named, kept for a deferred release.
    free_stream: Option<Stream>,
    /// An explicit `free` failed and was not retried with success: the
    /// drop and the collector's release give the memory up rather than
    /// deallocate the pointer again (the driver may have freed it before
    /// reporting the error).
    free_failed: bool,
}

/// Set in [`DeviceBuffer::exports`] once `free` was called: no new exports,
/// no copies.
const CLOSED: usize = 1 << (usize::BITS - 1);
/// The live-export count in [`DeviceBuffer::exports`]: the other bits.
const COUNT: usize = !CLOSED;

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
/// // SAFETY: the malloc resource hands out real host memory.
/// unsafe { buf.copy_from_host(b"abc")? };
/// let mut back = [0u8; 3];
/// // SAFETY: as above.
/// unsafe { buf.copy_to_host(&mut back)? };
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
    /// The closed mark ([`CLOSED`]) and the live exports and copy holds
    /// ([`COUNT`]) in one word, so an export and its deleter change it with
    /// one atomic instruction each and never take `state`'s lock.
    ///
    /// The protocol (argued once, here): the memory goes back exactly once,
    /// by whoever moves the word to "closed, count 0". Every change is a
    /// read-modify-write of this one word, so all of them fall in a single
    /// order. `acquire_export` adds one only to a word without `CLOSED`
    /// (a compare-and-swap), so once `free` sets `CLOSED` the count can
    /// only fall. `free` sets `CLOSED` with `fetch_or`: if the count it
    /// replaced was 0, nothing can hold the memory and `free` releases it;
    /// otherwise the `release_export` that takes the count from 1 to 0
    /// under `CLOSED` is the last holder, and it releases it. Exactly one of
    /// those two sees the transition. The releaser takes `state`'s lock to
    /// read the stream `free` named; `free` holds that lock from its
    /// `fetch_or` until the stream is stored, so the releaser always finds
    /// it. Orderings: the decrements are `Release` and the two transitions
    /// `Acquire` (`AcqRel` read-modify-writes), so every holder's use of the
    /// memory happens before the release (all read-modify-writes of one word
    /// extend the release sequence). A failed `free` clears `CLOSED` again
    /// under the lock, as before this was atomic: the count was 0 and no
    /// export could start meanwhile.
    exports: AtomicUsize,
    state: Mutex<BufferState>,
    /// Adopted memory: its owner outside devmm may still read and write it.
    foreign: bool,
    /// Memory its producer lent read-only: every write through devmm is
    /// refused ([`Error::ReadOnly`]), and every tensor over it is read-only.
    read_only: bool,
    /// The devmm buffer whose memory this one views (a DLPack import of a
    /// devmm export holds that buffer directly): a later import of this
    /// one views that buffer too, so imports never nest.
    views: Option<Arc<DeviceBuffer>>,
}

impl DeviceBuffer {
    /// Allocates `nbytes` from `resource`, ordered on `stream`. An
    /// out-of-memory failure runs the [`on_out_of_memory`](crate::on_out_of_memory)
    /// hooks before it is returned.
    pub fn new(nbytes: usize, resource: Arc<dyn MemoryResource>, stream: &Stream) -> Result<Self> {
        let ptr = crate::observe_allocation(|| resource.allocate(nbytes, stream))?;
        if ptr.is_null() && nbytes > 0 {
            return Err(Error::Misuse {
                kind: MisuseKind::NullAllocation,
                ptr,
                nbytes,
                device: resource.device(),
                resource: crate::resource::resource_chain(&*resource),
                test_double: false,
            });
        }
        Ok(DeviceBuffer {
            ptr,
            nbytes,
            resource,
            stream: stream.clone(),
            exports: AtomicUsize::new(0),
            state: Mutex::default(),
            foreign: false,
            read_only: false,
            views: None,
        })
    }

    /// Holds foreign memory (`nbytes` at `ptr`, which devmm did not
    /// allocate) as a buffer: dropping or freeing it runs `resource`'s
    /// release once, after the last export is gone, and never a devmm
    /// allocator's free. The memory counts in
    /// [`foreign_memory`](crate::foreign_memory) while the buffer lives.
    ///
    /// A null `ptr` with `nbytes > 0` is refused (and `resource`'s release
    /// runs when it drops).
    pub fn adopt(
        ptr: DevicePtr,
        nbytes: usize,
        resource: crate::foreign::ForeignMemoryResource,
        stream: &Stream,
    ) -> Result<Self> {
        if ptr.is_null() && nbytes > 0 {
            return Err(Error::Misuse {
                kind: MisuseKind::NullAllocation,
                ptr,
                nbytes,
                device: resource.device(),
                resource: format!("{resource:?}"),
                test_double: false,
            });
        }
        resource.adopt(ptr, nbytes)?;
        Ok(DeviceBuffer {
            ptr,
            nbytes,
            resource: Arc::new(resource),
            stream: stream.clone(),
            exports: AtomicUsize::new(0),
            state: Mutex::default(),
            foreign: true,
            read_only: false,
            views: None,
        })
    }

    /// Records that this buffer views `origin`'s memory.
    pub(crate) fn viewing(mut self, origin: Arc<DeviceBuffer>) -> Self {
        self.views = Some(origin);
        self
    }

    /// The buffer that owns this one's memory: the one it views, else itself.
    pub(crate) fn origin(self: &Arc<Self>) -> &Arc<DeviceBuffer> {
        self.views.as_ref().unwrap_or(self)
    }

    /// The same buffer, its memory read-only: devmm refuses every write to
    /// it ([`Error::ReadOnly`]) and every tensor over it is read-only.
    ///
    /// ```
    /// let buf = devmm::DeviceBuffer::on_device(4, devmm::Device::CPU)?.into_read_only();
    /// assert!(buf.is_read_only());
    /// // SAFETY: the CPU's default resource hands out real host memory.
    /// let refused = unsafe { buf.copy_from_host(b"hi") }.unwrap_err();
    /// assert!(matches!(refused, devmm::Error::ReadOnly { .. }));
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn into_read_only(mut self) -> Self {
        self.read_only = true;
        self
    }

    /// Whether the memory is read-only ([`into_read_only`](Self::into_read_only)).
    pub fn is_read_only(&self) -> bool {
        self.read_only
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
        let resource = crate::defaults::resource(device)?;
        let stream = crate::defaults::stream(device)?;
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

    /// Whether releasing the memory here, on the buffer's own stream, may
    /// block the calling thread until the device has run queued work. Host
    /// memory has no queued work. Memory a GPU runtime serves may:
    /// - through a resource that is not stream-ordered (a synchronous
    ///   `cudaFree` or `cudaFreeHost` waits for the device; a foreign
    ///   owner's release waits for the buffer's stream first);
    /// - through a stream-ordered one whose free cannot be queued on the
    ///   buffer's stream from this thread: another thread's per-thread
    ///   default stream (the whole device is waited for), or a stream of
    ///   another device (that stream is).
    ///
    /// Otherwise a stream-ordered free only queues. "May": a caller holding
    /// a lock that the work may need (the Python binding, the GIL) lets it
    /// go around such a release, and letting it go needlessly costs only
    /// time.
    ///
    /// ```
    /// let buf = devmm::DeviceBuffer::on_device(64, devmm::Device::CPU)?;
    /// assert!(!buf.release_may_wait());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn release_may_wait(&self) -> bool {
        let device = self.device();
        device.ty() != crate::DeviceType::Cpu
            && (!self.resource.stream_ordered()
                || !self.stream.is_usable_here()
                || self.stream.device() != device)
    }

    /// The stream the buffer was allocated on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// The resource that owns the memory.
    pub fn resource(&self) -> &Arc<dyn MemoryResource> {
        &self.resource
    }

    /// Whether the memory was [adopted](Self::adopt) from outside devmm
    /// (a DLPack import, a foreign allocation): its owner may still read
    /// and write it, so devmm never hands out a `&mut` view of it.
    ///
    /// ```
    /// let buf = devmm::DeviceBuffer::on_device(8, devmm::Device::CPU)?;
    /// assert!(!buf.is_foreign());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn is_foreign(&self) -> bool {
        self.foreign
    }

    /// Whether [`free`](Self::free) was called.
    pub fn is_closed(&self) -> bool {
        self.exports.load(Ordering::Acquire) & CLOSED != 0
    }

    /// The number of DLPack exports not yet deleted.
    pub fn live_exports(&self) -> usize {
        self.exports.load(Ordering::Acquire) & COUNT
    }

    fn state(&self) -> MutexGuard<'_, BufferState> {
        // Every update under the lock is a few plain stores; a panic cannot
        // leave it half-done, so a poisoned lock is still consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Frees the memory, ordered on `stream`. Idempotent: later calls do
    /// nothing. With live exports the buffer closes now and the memory goes
    /// back when the last export is deleted.
    ///
    /// When the resource fails to free the memory (a driver error, a
    /// callback that raised), the buffer stays live and open and the error
    /// is an [`Error::FreeFailed`]: call `free` again once the cause is
    /// fixed, rather than lose the memory. Only such an explicit retry
    /// deallocates the pointer a second time: the drop, or the collector's
    /// [`free_or_log`](Self::free_or_log), of a buffer whose last `free`
    /// failed gives the memory up (logged) instead, since a driver may have
    /// freed it before reporting an earlier error and nobody is there to
    /// know.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use devmm::{CallbackMemoryResource, Device, DeviceBuffer, DevicePtr, Error, Stream};
    /// let fail = Arc::new(AtomicBool::new(true));
    /// let failing = fail.clone();
    /// let mr = CallbackMemoryResource::new(
    ///     Device::CPU,
    ///     1,
    ///     |_, _| Ok(DevicePtr::from_addr(0x1000)),
    ///     move |_, _, _| match failing.load(Ordering::Relaxed) {
    ///         true => Err(Error::InvalidArgument { reason: "busy".into() }),
    ///         false => Ok(()),
    ///     },
    /// )?;
    /// let s = Stream::cpu();
    /// let buf = DeviceBuffer::new(8, Arc::new(mr), &s)?;
    /// assert!(matches!(buf.free(&s), Err(Error::FreeFailed { .. })));
    /// assert!(!buf.is_closed());
    /// fail.store(false, Ordering::Relaxed);
    /// buf.free(&s)?;
    /// assert!(buf.is_closed());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn free(&self, stream: &Stream) -> Result<()> {
        self.close_and_release(stream, AfterFailure::Reopen)
            .map_err(|source| Error::FreeFailed {
                device: self.device(),
                nbytes: self.nbytes,
                source: Box::new(source),
            })
    }

    /// `free`, with what a failed deallocation leaves decided by the
    /// caller; the error is the resource's own.
    fn close_and_release(&self, stream: &Stream, after_failure: AfterFailure) -> Result<()> {
        // The lock orders `free` calls and keeps a deferred releaser from
        // reading `free_stream` before it is stored (see `exports`).
        let mut state = self.state();
        let before = self.exports.fetch_or(CLOSED, Ordering::AcqRel);
        if before & CLOSED != 0 {
            return Ok(());
        }
        if before & COUNT > 0 {
            state.free_stream = Some(stream.clone());
            return Ok(());
        }
        let due = take_release(&mut state);
        let failed_before = state.free_failed;
        drop(state);
        if !due {
            return Ok(());
        }
        if failed_before && after_failure == AfterFailure::GiveUp {
            self.give_up("its last free failed");
            return Ok(());
        }
        self.deallocate(stream).inspect_err(|_| {
            if after_failure == AfterFailure::Reopen {
                let mut state = self.state();
                self.exports.fetch_and(COUNT, Ordering::Release);
                state.released = false;
                state.free_failed = true;
            }
        })
    }

    /// Logs memory given up without a deallocate: a buffer whose explicit
    /// `free` failed, released by the drop or the collector.
    #[cold]
    fn give_up(&self, why: &str) {
        tracing::error!(
            target: "devmm::buffer",
            nbytes = self.nbytes,
            device = %self.device(),
            "{why}, so the memory is given up, not deallocated again; call free() again \
             and check its result to return it"
        );
    }

    /// Returns the memory to the resource. The lock is not held here: a
    /// resource's `deallocate` may be user code (a closure, a Python
    /// method) that looks at this buffer or waits for a lock of its own.
    fn deallocate(&self, stream: &Stream) -> Result<()> {
        // SAFETY: `ptr` came from `resource.allocate(nbytes, ..)` in `new`;
        // callers reach here only after `take_release` returned true, once.
        unsafe { self.resource.deallocate(self.ptr, self.nbytes, stream) }
    }

    /// Registers a DLPack export (or an in-flight copy), refused once the
    /// buffer is closed; while any is live, `free` defers the release.
    #[inline]
    pub(crate) fn acquire_export(&self) -> Result<()> {
        let mut word = self.exports.load(Ordering::Relaxed);
        loop {
            if word & CLOSED != 0 {
                return Err(self.closed_error());
            }
            // Every holder owns at least a heap block or a stack frame, so
            // the count cannot reach the closed bit; checked all the same.
            if word == COUNT {
                return Err(Error::InvalidArgument {
                    reason: format!(
                        "a buffer of {} bytes on {} has {COUNT} live exports; delete some first",
                        self.nbytes,
                        self.device()
                    ),
                });
            }
            match self.exports.compare_exchange_weak(
                word,
                word + 1,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(()),
                Err(now) => word = now,
            }
        }
    }

    /// Ends a DLPack export whose consumer worked on `consumer`: the
    /// streams the memory will be released on (the allocation stream, and
    /// the one `free` named) first wait for the consumer's work, so the
    /// release, now or later, never overtakes it. The last export of a
    /// closed buffer releases it.
    ///
    /// When the release cannot be ordered after the consumer (its stream
    /// is capturing a graph, whose launches may read the memory later; a
    /// driver failure), the export is not ended: the memory stays
    /// allocated rather than be freed under the consumer, and this answers
    /// `false` so the caller keeps its reference too.
    #[must_use]
    pub(crate) fn release_export_after(&self, consumer: Option<&Stream>) -> bool {
        if let Some(consumer) = consumer {
            // `free_stream` is only ever set on a closed buffer, and waits
            // once when it is the allocation stream.
            let free_stream = match self.is_closed() {
                true => self.state().free_stream.clone(),
                false => None,
            }
            .filter(|stream| *stream != self.stream);
            // A stream is ordered after its own work already: only the
            // others wait (the consumer may be the allocation stream).
            let releasing = std::iter::once(&self.stream).chain(free_stream.as_ref());
            for stream in releasing.filter(|&stream| stream != consumer) {
                if let Err(error) = stream.wait(consumer).or_else(|_| consumer.synchronize()) {
                    tracing::error!(
                        target: "devmm::buffer",
                        %error,
                        nbytes = self.nbytes,
                        device = %self.device(),
                        "could not order a release after its consumer, so the memory is kept \
                         (never freed) rather than freed under the consumer's work; release \
                         DLPack exports after ending a stream capture that reads them"
                    );
                    return false;
                }
            }
        }
        self.release_export();
        true
    }

    /// Ends a DLPack export; the last one of a closed buffer releases it.
    #[inline]
    pub(crate) fn release_export(&self) {
        let mut word = self.exports.load(Ordering::Relaxed);
        loop {
            // An end without a start is a devmm bug: ignore it rather than
            // borrow from the closed bit.
            if word & COUNT == 0 {
                debug_assert!(false, "release_export without acquire_export");
                return;
            }
            match self.exports.compare_exchange_weak(
                word,
                word - 1,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(now) => word = now,
            }
        }
        if word == CLOSED | 1 {
            self.release_deferred();
        }
    }

    /// The release `free` deferred to the last export, which has just ended.
    #[cold]
    fn release_deferred(&self) {
        let mut state = self.state();
        if !take_release(&mut state) {
            return;
        }
        let stream = state
            .free_stream
            .take()
            .unwrap_or_else(|| self.stream.clone());
        drop(state);
        if let Err(error) = self.deallocate(&stream) {
            tracing::error!(target: "devmm::buffer", %error, "deferred release failed");
        }
    }

    /// `Ok` while the buffer is open; after [`free`](Self::free), the
    /// [`Error::BufferClosed`] every use of it gets.
    ///
    /// ```
    /// use devmm::{DeviceBuffer, Error, MallocMemoryResource, Stream};
    /// let buf = DeviceBuffer::new(8, std::sync::Arc::new(MallocMemoryResource::new()), &Stream::cpu())?;
    /// buf.check_open()?;
    /// buf.free(&Stream::cpu())?;
    /// assert!(matches!(buf.check_open(), Err(Error::BufferClosed { nbytes: 8, .. })));
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn check_open(&self) -> Result<()> {
        match self.is_closed() {
            false => Ok(()),
            true => Err(self.closed_error()),
        }
    }

    /// What a use of the buffer after [`free`](Self::free) gets.
    pub(crate) fn closed_error(&self) -> Error {
        Error::BufferClosed {
            device: self.device(),
            nbytes: self.nbytes,
        }
    }

    /// The length of a host copy of `len` bytes from byte `offset` (all
    /// that follows `offset` when `None`), checked to fit the buffer: the
    /// one rule every copy path applies, so a binding can refuse an absurd
    /// size before it makes host memory for it. A copy that does not fit is
    /// an [`Error::Refused`], whose text is the whole message.
    ///
    /// ```
    /// let buf = devmm::DeviceBuffer::on_device(8, devmm::Device::CPU)?;
    /// assert_eq!(buf.copy_len(3, None)?, 5);
    /// assert_eq!(buf.copy_len(8, Some(0))?, 0);
    /// let refused = buf.copy_len(6, Some(4)).unwrap_err();
    /// assert!(refused.to_string().starts_with("cannot copy 4 bytes at offset 6 of a 8-byte buffer"));
    /// assert!(matches!(refused, devmm::Error::Refused { .. }));
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn copy_len(&self, offset: usize, len: Option<usize>) -> Result<usize> {
        let available = self.nbytes.checked_sub(offset);
        let len = len.unwrap_or(available.unwrap_or(0));
        match available {
            // Compared, not added: no extent can overflow.
            Some(available) if len <= available => Ok(len),
            _ => Err(Error::Refused {
                reason: format!(
                    "cannot copy {len} bytes at offset {offset} of a {}-byte buffer on {}: the \
                     copy does not fit; copy fewer bytes or use a larger buffer",
                    self.nbytes,
                    self.device()
                ),
            }),
        }
    }

    /// Checks a copy of `len` bytes at `offset` and holds the buffer open
    /// until the returned guard drops, so a concurrent `free` waits for the copy.
    fn hold_for_copy(&self, offset: usize, len: usize) -> Result<BufferHold<'_>> {
        crate::resource::check_dereferenceable(&*self.resource, "a host copy")?;
        self.copy_len(offset, Some(len))?;
        BufferHold::new(self)
    }

    /// Frees the buffer on its allocation stream, logging a failure instead
    /// of returning it: for a garbage collector breaking a cycle, which has
    /// no caller to report to (as a drop has none).
    ///
    /// A failed release here is final, as a failed drop is: the buffer
    /// closes and the memory is given up (logged), never deallocated again
    /// by a later call or the drop, since nobody is there to fix the cause
    /// and a driver may have freed it before reporting an earlier error.
    /// After an explicit [`free`](Self::free) that failed, it deallocates
    /// nothing: it closes the buffer and gives the memory up (logged).
    ///
    /// ```
    /// let buf = devmm::DeviceBuffer::on_device(8, devmm::Device::CPU)?;
    /// buf.free_or_log();
    /// assert!(buf.is_closed());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn free_or_log(&self) {
        if let Err(error) = self.close_and_release(&self.stream, AfterFailure::GiveUp) {
            tracing::error!(
                target: "devmm::buffer",
                %error,
                nbytes = self.nbytes,
                device = %self.device(),
                "release by the collector failed; the memory is given up, not deallocated again"
            );
        }
    }

    /// Copies `src` to the start of the buffer through the runtime's
    /// memcpy, on the buffer's stream.
    ///
    /// Refused with [`Error::NotDereferenceable`] unless the resource
    /// declares its pointers [`dereferenceable`](MemoryResource::dereferenceable)
    /// (every shipped resource does; the testing kit's
    /// `RecordingMemoryResource` and undeclared callback resources do not).
    ///
    /// # Safety
    ///
    /// The resource's declaration must be true: a resource that declares
    /// dereferenceable memory and hands out addresses it does not own makes
    /// this write to arbitrary memory.
    pub unsafe fn copy_from_host(&self, src: &[u8]) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { self.copy_from_host_at(0, src, &self.stream) }
    }

    /// Copies the start of the buffer into `dst` and waits for it.
    ///
    /// Refused as [`copy_from_host`](Self::copy_from_host) is.
    ///
    /// # Safety
    ///
    /// As for [`copy_from_host`](Self::copy_from_host): the resource's
    /// declaration that its pointers are real memory must be true.
    pub unsafe fn copy_to_host(&self, dst: &mut [u8]) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { self.copy_to_host_at(0, dst, &self.stream) }
    }

    /// Copies `src` into the buffer from byte `offset`, on `stream`; on a
    /// default stream the copy is finished when this returns, on another
    /// it is asynchronous and `src` must stay unchanged until `stream` is
    /// synchronized (rmm's rule, see [`copy_host_to_ptr`](crate::copy_host_to_ptr)).
    ///
    /// ```
    /// let buf = devmm::DeviceBuffer::on_device(5, devmm::Device::CPU)?;
    /// let stream = devmm::Stream::cpu();
    /// // SAFETY: the CPU's default resource hands out real host memory.
    /// unsafe { buf.copy_from_host_at(0, b"hello", &stream)? };
    /// unsafe { buf.copy_from_host_at(1, b"EL", &stream)? };
    /// let mut back = [0u8; 4];
    /// unsafe { buf.copy_to_host_at(1, &mut back, &stream)? };
    /// assert_eq!(&back, b"ELlo");
    /// assert!(unsafe { buf.copy_to_host_at(2, &mut back, &stream) }.is_err()); // past the end
    /// # Ok::<(), devmm::Error>(())
    /// ```
    ///
    /// # Safety
    ///
    /// As for [`copy_from_host`](Self::copy_from_host).
    pub unsafe fn copy_from_host_at(
        &self,
        offset: usize,
        src: &[u8],
        stream: &Stream,
    ) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly {
                operation: format!(
                    "copy {} bytes from the host into it at offset {offset}",
                    src.len()
                ),
                device: self.device(),
                nbytes: self.nbytes,
            });
        }
        let _hold = self.hold_for_copy(offset, src.len())?;
        // The memory must be of a device the stream's runtime serves.
        stream.runtime_serving(self.device())?;
        // SAFETY: the caller vouches the pointer is real memory; the hold
        // keeps it allocated, and `offset + src.len()` fits the buffer.
        unsafe { crate::copy::copy_host_to_ptr(src, self.at(offset), stream) }
    }

    /// Copies `dst.len()` bytes from byte `offset` of the buffer into `dst`,
    /// on `stream`, and waits for them.
    ///
    /// # Safety
    ///
    /// As for [`copy_from_host`](Self::copy_from_host).
    pub unsafe fn copy_to_host_at(
        &self,
        offset: usize,
        dst: &mut [u8],
        stream: &Stream,
    ) -> Result<()> {
        let _hold = self.hold_for_copy(offset, dst.len())?;
        stream.runtime_serving(self.device())?;
        // SAFETY: as in `copy_from_host_at`, for reads.
        unsafe { crate::copy::copy_ptr_to_host(self.at(offset), dst, stream) }
    }

    /// The address `offset` bytes in; in range after `hold_for_copy`, and an
    /// allocation never wraps the address space.
    fn at(&self, offset: usize) -> DevicePtr {
        DevicePtr::from_addr(self.ptr.addr() + offset)
    }

    /// A new buffer from `resource` holding a copy of `data`, as rmm's
    /// `DeviceBuffer.to_device` (the copy follows rmm's default-stream rule).
    ///
    /// ```
    /// use std::sync::Arc;
    /// let mr = Arc::new(devmm::MallocMemoryResource::new());
    /// // SAFETY: malloc hands out real host memory.
    /// let buf = unsafe { devmm::DeviceBuffer::to_device(b"abc", mr, &devmm::Stream::cpu()) }?;
    /// assert_eq!(buf.nbytes(), 3);
    /// # Ok::<(), devmm::Error>(())
    /// ```
    ///
    /// # Safety
    ///
    /// As for [`copy_from_host`](Self::copy_from_host).
    pub unsafe fn to_device(
        data: &[u8],
        resource: Arc<dyn MemoryResource>,
        stream: &Stream,
    ) -> Result<DeviceBuffer> {
        let buffer = DeviceBuffer::new(data.len(), resource, stream)?;
        // SAFETY: forwarded from the caller.
        unsafe { buffer.copy_from_host_at(0, data, stream) }?;
        Ok(buffer)
    }
}

/// What a failed deallocation leaves: an explicit `free` has a caller who
/// may fix the cause and call it again; the collector's release has none.
#[derive(Clone, Copy, PartialEq, Eq)]
enum AfterFailure {
    /// The buffer is live and open again, so `free` may be retried; the
    /// drop and the collector's release give the memory up instead.
    Reopen,
    /// The buffer stays closed and released: no second deallocate.
    GiveUp,
}

/// Marks the memory released; true when the caller must now deallocate it.
fn take_release(state: &mut BufferState) -> bool {
    !std::mem::replace(&mut state.released, true)
}

/// Keeps a buffer open for the length of a copy.
/// Keeps a buffer open (an export in its count) until dropped: a `free`
/// meanwhile closes the buffer and the drop returns the memory.
pub(crate) struct BufferHold<'a>(&'a DeviceBuffer);

impl<'a> BufferHold<'a> {
    /// Refused with [`Error::BufferClosed`] once the buffer was freed.
    pub(crate) fn new(buffer: &'a DeviceBuffer) -> Result<BufferHold<'a>> {
        buffer.acquire_export()?;
        Ok(BufferHold(buffer))
    }

    /// The buffer held open.
    pub(crate) fn buffer(&self) -> &'a DeviceBuffer {
        self.0
    }
}

impl Drop for BufferHold<'_> {
    fn drop(&mut self) {
        self.0.release_export();
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        if !take_release(state) {
            return;
        }
        if state.free_failed {
            self.give_up("a buffer whose last free failed was dropped");
        } else if let Err(error) = self.deallocate(&self.stream) {
            tracing::error!(target: "devmm::buffer", %error, "release on drop failed");
        }
    }
}

impl fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("ptr", &self.ptr)
            .field("nbytes", &self.nbytes)
            .field("device", &self.device())
            .field("closed", &self.is_closed())
            .field("exports", &self.live_exports())
            .finish()
    }
}

impl fmt::Display for DeviceBuffer {
    /// The Python binding's form: `DeviceBuffer(ptr=0x..., nbytes=8,
    /// device=cpu:0, closed=False)`.
    ///
    /// ```
    /// let buf = devmm::DeviceBuffer::on_device(0, devmm::Device::CPU)?;
    /// assert_eq!(buf.to_string(), "DeviceBuffer(ptr=0x0, nbytes=0, device=cpu:0, closed=False)");
    /// # Ok::<(), devmm::Error>(())
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DeviceBuffer(ptr={:#x}, nbytes={}, device={}, closed={})",
            self.ptr.addr(),
            self.nbytes,
            self.device(),
            if self.is_closed() { "True" } else { "False" }
        )
    }
}
