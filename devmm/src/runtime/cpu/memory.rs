//! The CPU memory resources: libc's allocator, and a checked heap resource
//! over `std::alloc` that serves as the reference for tests.

use std::alloc::Layout as AllocLayout;
use std::fmt;

use crate::device::Device;
use crate::error::{Error, MisuseKind, Result};
use crate::ledger::{Ledger, misuse_of};
use crate::ptr::DevicePtr;
use crate::resource::{MemoryInfo, MemoryResource};
use crate::stream::Stream;

/// The default alignment of the CPU resources: one cache line.
pub const CPU_DEFAULT_ALIGNMENT: usize = 64;

/// The one rule for where a host resource lives: `cpu:0`, the device of
/// host memory; anything else is an [`Error::InvalidArgument`] naming
/// `resource`, so a caller that passes a device gets told, not ignored.
///
/// ```
/// use devmm::{require_host_device, Device};
/// assert!(require_host_device("MallocMemoryResource", Device::CPU).is_ok());
/// let err = require_host_device("MallocMemoryResource", "cuda:0".parse()?).unwrap_err();
/// assert!(err.to_string().contains("host memory on cpu:0, not cuda:0"));
/// # Ok::<(), devmm::Error>(())
/// ```
pub fn require_host_device(resource: &str, device: Device) -> Result<()> {
    if device == Device::CPU {
        return Ok(());
    }
    Err(Error::InvalidArgument {
        reason: format!(
            "{resource} requires a cpu device: it hands out host memory on cpu:0, not \
             {device}; pass a cpu device or use a resource of {device}"
        ),
    })
}

fn out_of_memory(mr: &dyn MemoryResource, nbytes: usize, detail: String) -> Error {
    Error::OutOfMemory {
        device: Device::CPU,
        nbytes,
        chain: crate::resource::resource_chain(mr),
        detail: Some(detail),
        pool: None,
    }
}

/// `posix_memalign` / `free` from the C library.
///
/// ```
/// use devmm::{mrs::cpu::MallocMemoryResource, MemoryResource};
/// let mr = MallocMemoryResource::new();
/// assert_eq!(format!("{mr:?}"), "MallocMemoryResource(device=cpu:0, alignment=64)");
/// assert!(MallocMemoryResource::with_alignment(48).is_err());
/// assert_eq!(MallocMemoryResource::with_alignment(1)?.guaranteed_alignment(), 1);
/// # Ok::<(), devmm::Error>(())
/// ```
#[derive(Clone, Copy)]
pub struct MallocMemoryResource {
    /// What the resource promises (and shows): the alignment asked for.
    alignment: usize,
    /// What `posix_memalign` is asked for: the promise, raised to the
    /// pointer size it requires (a stronger alignment keeps the promise).
    native_alignment: usize,
}

impl MallocMemoryResource {
    /// A resource aligning every pointer to 64 bytes.
    pub const fn new() -> MallocMemoryResource {
        MallocMemoryResource {
            alignment: CPU_DEFAULT_ALIGNMENT,
            native_alignment: CPU_DEFAULT_ALIGNMENT,
        }
    }

    /// A resource aligning every pointer to `alignment`, a power of two
    /// (1 promises nothing).
    pub fn with_alignment(alignment: usize) -> Result<MallocMemoryResource> {
        crate::resource::check_alignment("MallocMemoryResource", alignment)?;
        Ok(MallocMemoryResource {
            alignment,
            native_alignment: alignment.max(std::mem::size_of::<usize>()),
        })
    }
}

impl MallocMemoryResource {
    /// The error, built out of line: the inlined fast path (and the
    /// adaptors it is inlined into) keeps no registers for it.
    #[cold]
    #[inline(never)]
    fn posix_memalign_failed(&self, nbytes: usize, status: libc::c_int) -> Error {
        out_of_memory(self, nbytes, format!("posix_memalign returned {status}"))
    }
}

impl Default for MallocMemoryResource {
    fn default() -> Self {
        MallocMemoryResource::new()
    }
}

impl fmt::Debug for MallocMemoryResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "MallocMemoryResource(device={}, alignment={})",
            Device::CPU,
            self.alignment
        )
    }
}

// `#[inline]`: an adaptor stack over this resource (generic code, built in
// the user's crate) then calls posix_memalign directly instead of through
// one more frame (docs/benchmarks.md).
impl MemoryResource for MallocMemoryResource {
    #[inline]
    fn allocate(&self, nbytes: usize, _stream: &Stream) -> Result<DevicePtr> {
        if nbytes == 0 {
            return Ok(DevicePtr::NULL);
        }
        let mut out: *mut libc::c_void = std::ptr::null_mut();
        // SAFETY: `out` is a valid place for the result; the alignment is a
        // power of two multiple of sizeof(void*) (made so at construction).
        let status = unsafe { libc::posix_memalign(&mut out, self.native_alignment, nbytes) };
        if status != 0 || out.is_null() {
            return Err(self.posix_memalign_failed(nbytes, status));
        }
        Ok(DevicePtr::from_host_ptr(out))
    }

    #[inline]
    unsafe fn deallocate(&self, ptr: DevicePtr, nbytes: usize, _stream: &Stream) -> Result<()> {
        if crate::ledger::check_null(ptr, nbytes)
            .map_err(|kind| misuse_of(self, kind, ptr, nbytes))?
        {
            return Ok(());
        }
        // SAFETY: the caller guarantees `ptr` came from posix_memalign above
        // and is freed once.
        unsafe { libc::free(ptr.as_host_ptr()) };
        Ok(())
    }

    fn device(&self) -> Device {
        Device::CPU
    }

    /// A platform allocator: it calls no other resource.
    fn nesting_bound() -> Option<usize> {
        Some(0)
    }

    fn shipped(&self) -> Option<crate::ShippedResource> {
        Some(crate::ShippedResource::Malloc)
    }

    fn guaranteed_alignment(&self) -> usize {
        self.alignment
    }

    fn available_memory(&self) -> Result<MemoryInfo> {
        super::host_memory_info()
    }

    fn dereferenceable(&self) -> bool {
        true
    }
}

/// A checked resource over Rust's global allocator.
///
/// It records every live allocation, so `deallocate` with an unknown
/// pointer, a wrong size or a pointer already freed is a typed
/// [`Error::Misuse`] that leaves the heap untouched. It is the reference
/// resource of the test suites.
///
/// ```
/// use devmm::mrs::cpu::HeapMemoryResource;
/// use devmm::{Error, MemoryResource, Stream};
/// let mr = HeapMemoryResource::new();
/// let s = Stream::cpu();
/// let p = mr.allocate(32, &s)?;
/// assert_eq!(mr.live_count(), Some(1));
/// // SAFETY: the heap resource checks its arguments; misuse is an error.
/// assert!(matches!(unsafe { mr.deallocate(p, 16, &s) }, Err(Error::Misuse { .. })));
/// unsafe { mr.deallocate(p, 32, &s)? };
/// assert!(matches!(unsafe { mr.deallocate(p, 32, &s) }, Err(Error::Misuse { .. })));
/// # Ok::<(), devmm::Error>(())
/// ```
pub struct HeapMemoryResource {
    alignment: usize,
    ledger: Ledger,
}

impl HeapMemoryResource {
    /// A resource aligning every pointer to 64 bytes.
    pub fn new() -> HeapMemoryResource {
        HeapMemoryResource {
            alignment: CPU_DEFAULT_ALIGNMENT,
            ledger: Ledger::new(),
        }
    }

    /// A resource aligning every pointer to `alignment` (a power of two).
    pub fn with_alignment(alignment: usize) -> Result<HeapMemoryResource> {
        crate::resource::check_alignment("HeapMemoryResource", alignment)?;
        Ok(HeapMemoryResource {
            alignment,
            ledger: Ledger::new(),
        })
    }
}

impl Default for HeapMemoryResource {
    fn default() -> Self {
        HeapMemoryResource::new()
    }
}

impl fmt::Debug for HeapMemoryResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "HeapMemoryResource(device={}, alignment={})",
            Device::CPU,
            self.alignment
        )
    }
}

impl Drop for HeapMemoryResource {
    fn drop(&mut self) {
        // Allocations still live belong to buffers that outlived the
        // resource's last owner, which DeviceBuffer's ownership prevents; a
        // leak here would be a bug elsewhere, so release them rather than leak.
        for (ptr, nbytes) in self.ledger.drain() {
            if let Ok(layout) = AllocLayout::from_size_align(nbytes, self.alignment) {
                // SAFETY: every live entry was allocated with this layout.
                unsafe { std::alloc::dealloc(ptr.as_host_ptr(), layout) };
            }
        }
    }
}

impl MemoryResource for HeapMemoryResource {
    fn allocate(&self, nbytes: usize, _stream: &Stream) -> Result<DevicePtr> {
        if nbytes == 0 {
            return Ok(DevicePtr::NULL);
        }
        let layout = AllocLayout::from_size_align(nbytes, self.alignment).map_err(|_| {
            out_of_memory(
                self,
                nbytes,
                "the size exceeds isize::MAX once aligned".into(),
            )
        })?;
        // SAFETY: `layout` has a non-zero size.
        let raw = unsafe { std::alloc::alloc(layout) };
        if raw.is_null() {
            return Err(out_of_memory(
                self,
                nbytes,
                "the global allocator returned null".into(),
            ));
        }
        let ptr = DevicePtr::from_host_ptr(raw);
        self.ledger.record(ptr, nbytes);
        Ok(ptr)
    }

    unsafe fn deallocate(&self, ptr: DevicePtr, nbytes: usize, _stream: &Stream) -> Result<()> {
        self.ledger
            .take(ptr, nbytes)
            .map_err(|kind| misuse_of(self, kind, ptr, nbytes))?;
        if ptr.is_null() {
            return Ok(());
        }
        // A live entry's layout was valid when it was allocated.
        let Ok(layout) = AllocLayout::from_size_align(nbytes, self.alignment) else {
            return Err(misuse_of(self, MisuseKind::UnknownPointer, ptr, nbytes));
        };
        // SAFETY: the pointer was live in the ledger with this size, so it
        // came from `alloc(layout)` and has not been freed.
        unsafe { std::alloc::dealloc(ptr.as_host_ptr(), layout) };
        Ok(())
    }

    fn device(&self) -> Device {
        Device::CPU
    }

    /// A platform allocator: it calls no other resource.
    fn nesting_bound() -> Option<usize> {
        Some(0)
    }

    fn shipped(&self) -> Option<crate::ShippedResource> {
        Some(crate::ShippedResource::Heap)
    }

    fn guaranteed_alignment(&self) -> usize {
        self.alignment
    }

    fn available_memory(&self) -> Result<MemoryInfo> {
        super::host_memory_info()
    }

    fn detects_misuse(&self) -> bool {
        true
    }

    fn live_count(&self) -> Option<usize> {
        Some(self.ledger.live_count())
    }

    fn dereferenceable(&self) -> bool {
        true
    }
}
