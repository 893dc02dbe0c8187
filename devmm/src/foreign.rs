//! Foreign memory: allocations devmm did not make (a DLPack import, a
//! cudarc `CudaSlice`) held as a [`DeviceBuffer`](crate::DeviceBuffer)
//! whose release hands the memory back to its owner.
//!
//! Every foreign buffer has its own [`ForeignMemoryResource`]: it never
//! allocates, and its one `deallocate` runs the owner's release exactly
//! once. Process-wide counters ([`foreign_memory`]) make imports visible to
//! accounting: they show what devmm holds that no devmm resource will free.
//!
//! ```
//! use devmm::{foreign_memory, ForeignMemoryResource, DeviceBuffer, Device, DevicePtr, Stream};
//! let before = foreign_memory();
//! let bytes = Box::leak(vec![7u8; 16].into_boxed_slice());
//! let ptr = DevicePtr::from_addr(bytes.as_mut_ptr() as usize);
//! let owner = bytes.as_mut_ptr() as usize;
//! let mr = ForeignMemoryResource::new(Device::CPU, "a boxed slice", move || {
//!     // SAFETY: the slice leaked above, reclaimed once, here.
//!     drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(owner as *mut u8, 16)) });
//! });
//! let buffer = DeviceBuffer::adopt(ptr, 16, mr, &Stream::cpu())?;
//! assert_eq!(foreign_memory().live_bytes, before.live_bytes + 16);
//! drop(buffer); // runs the release
//! assert_eq!(foreign_memory().live_bytes, before.live_bytes);
//! # Ok::<(), devmm::Error>(())
//! ```

use std::borrow::Cow;
use std::fmt;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::device::Device;
use crate::error::{Error, Result};
use crate::ptr::DevicePtr;
use crate::resource::{MemoryInfo, MemoryResource};
use crate::stream::Stream;

/// A snapshot of the process-wide foreign-memory counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ForeignStatistics {
    /// Foreign buffers alive now.
    pub live_count: usize,
    /// Bytes of the foreign buffers alive now.
    pub live_bytes: usize,
    /// Foreign buffers ever adopted.
    pub total_count: usize,
    /// Bytes ever adopted.
    pub total_bytes: usize,
}

static LIVE_COUNT: AtomicUsize = AtomicUsize::new(0);
static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);
static TOTAL_COUNT: AtomicUsize = AtomicUsize::new(0);
static TOTAL_BYTES: AtomicUsize = AtomicUsize::new(0);

/// What devmm holds of memory it did not allocate (imports, wrapped
/// cudarc slices), across the process.
pub fn foreign_memory() -> ForeignStatistics {
    ForeignStatistics {
        live_count: LIVE_COUNT.load(Ordering::Relaxed),
        live_bytes: LIVE_BYTES.load(Ordering::Relaxed),
        total_count: TOTAL_COUNT.load(Ordering::Relaxed),
        total_bytes: TOTAL_BYTES.load(Ordering::Relaxed),
    }
}

/// How the owner takes its memory back.
enum Release {
    /// Any closure ([`ForeignMemoryResource::new`]).
    Closure(Box<dyn FnOnce() + Send>),
    /// A function of two words: a release that needs no allocation of its
    /// own, for the DLPack import, which made one box per import.
    Words(fn([usize; 2]), [usize; 2]),
}

impl Release {
    fn run(self) {
        match self {
            Release::Closure(release) => release(),
            Release::Words(release, words) => release(words),
        }
    }
}

struct Adopted {
    ptr: DevicePtr,
    nbytes: usize,
}

/// The resource of one foreign buffer: it allocates nothing, and
/// `deallocate` of the adopted block runs the owner's release once.
///
/// Its name in a resource chain says whose memory it is:
/// `ForeignMemoryResource(device=cpu:0, owner=DLPack import)`.
pub struct ForeignMemoryResource {
    device: Device,
    /// Borrowed when static: the DLPack import names its owner on every
    /// call, and a formatted name cost it an allocation each time.
    owner: Cow<'static, str>,
    release: Mutex<Option<Release>>,
    adopted: Mutex<Option<Adopted>>,
    /// Whether `deallocate` synchronizes the stream it is given before the
    /// release: for an owner whose release does not wait for work queued
    /// on the memory (an IPC mapping's `cudaFree`, a DLPack producer's
    /// deleter).
    synchronized: bool,
}

impl ForeignMemoryResource {
    /// A resource for memory on `device` that `owner` (a description for
    /// messages) hands back through `release`.
    pub fn new(
        device: Device,
        owner: impl Into<Cow<'static, str>>,
        release: impl FnOnce() + Send + 'static,
    ) -> ForeignMemoryResource {
        Self::with_release(device, owner.into(), Release::Closure(Box::new(release)))
    }

    /// [`new`](Self::new) with `release(words)` as the release: the same
    /// resource without a boxed closure.
    pub(crate) fn releasing_words(
        device: Device,
        owner: &'static str,
        release: fn([usize; 2]),
        words: [usize; 2],
    ) -> ForeignMemoryResource {
        Self::with_release(device, owner.into(), Release::Words(release, words))
    }

    fn with_release(
        device: Device,
        owner: Cow<'static, str>,
        release: Release,
    ) -> ForeignMemoryResource {
        ForeignMemoryResource {
            device,
            owner,
            release: Mutex::new(Some(release)),
            adopted: Mutex::new(None),
            synchronized: false,
        }
    }

    /// This resource, whose `deallocate` first waits for the stream it is
    /// given: for memory whose release unmaps it at once, with no ordering
    /// of its own, as `cudaFree` of an imported IPC pointer and
    /// `cudaIpcCloseMemHandle` do ("callers must ensure that all accesses
    /// to these pointer have completed before invoking cudaFree"), or that
    /// its owner reuses at once, as a DLPack producer's caching allocator
    /// does once its deleter runs.
    pub(crate) fn synchronizing(mut self) -> ForeignMemoryResource {
        self.synchronized = true;
        self
    }

    /// Who owns the memory.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Records the one block this resource stands for; counted as live
    /// foreign memory until it is deallocated.
    pub(crate) fn adopt(&self, ptr: DevicePtr, nbytes: usize) -> Result<()> {
        let mut adopted = lock(&self.adopted);
        if adopted.is_some() {
            return Err(Error::InvalidArgument {
                reason: format!(
                    "{self:?} already holds a block; make one ForeignMemoryResource per foreign buffer"
                ),
            });
        }
        *adopted = Some(Adopted { ptr, nbytes });
        LIVE_COUNT.fetch_add(1, Ordering::Relaxed);
        LIVE_BYTES.fetch_add(nbytes, Ordering::Relaxed);
        TOTAL_COUNT.fetch_add(1, Ordering::Relaxed);
        TOTAL_BYTES.fetch_add(nbytes, Ordering::Relaxed);
        Ok(())
    }

    fn run_release(&self) {
        // Taken before it runs, so the lock is not held while the owner's
        // code does.
        let release = lock(&self.release).take();
        if let Some(release) = release {
            release.run();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Updates under these locks are single stores: a poisoned lock is consistent.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Drop for ForeignMemoryResource {
    /// A resource dropped without adopting (a failed import) still hands
    /// the memory back.
    fn drop(&mut self) {
        self.run_release();
    }
}

impl fmt::Debug for ForeignMemoryResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ForeignMemoryResource(device={}, owner={})",
            self.device, self.owner
        )
    }
}

impl MemoryResource for ForeignMemoryResource {
    fn allocate(&self, nbytes: usize, _stream: &Stream) -> Result<DevicePtr> {
        Err(Error::OutOfMemory {
            device: self.device,
            nbytes,
            chain: format!("{self:?}"),
            detail: Some(
                "a foreign memory resource holds memory it did not allocate and never allocates; \
                 allocate from a devmm resource"
                    .into(),
            ),
            pool: None,
        })
    }

    unsafe fn deallocate(&self, ptr: DevicePtr, nbytes: usize, stream: &Stream) -> Result<()> {
        let mut adopted = lock(&self.adopted);
        match adopted.as_ref() {
            Some(block) if block.ptr == ptr && block.nbytes == nbytes => {}
            _ => {
                return Err(Error::Misuse {
                    kind: crate::error::MisuseKind::UnknownPointer,
                    ptr,
                    nbytes,
                    device: self.device,
                    resource: format!("{self:?}"),
                    test_double: false,
                });
            }
        }
        if self.synchronized {
            // Before the block is forgotten: a failed wait leaves it held,
            // and the free can be retried.
            stream.synchronize()?;
        }
        *adopted = None;
        drop(adopted);
        LIVE_COUNT.fetch_sub(1, Ordering::Relaxed);
        LIVE_BYTES.fetch_sub(nbytes, Ordering::Relaxed);
        self.run_release();
        Ok(())
    }

    fn device(&self) -> Device {
        self.device
    }

    fn guaranteed_alignment(&self) -> usize {
        1
    }

    /// The producer's memory is real memory of its device.
    fn dereferenceable(&self) -> bool {
        true
    }

    fn available_memory(&self) -> Result<MemoryInfo> {
        Ok(MemoryInfo { free: 0, total: 0 })
    }

    fn detects_misuse(&self) -> bool {
        true
    }

    fn live_count(&self) -> Option<usize> {
        Some(usize::from(lock(&self.adopted).is_some()))
    }
}
