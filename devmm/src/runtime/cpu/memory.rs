//! The CPU memory resources: libc's allocator, and a checked heap resource
//! over `std::alloc` that serves as the reference for tests.

use std::alloc::Layout as AllocLayout;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::Mutex;

use crate::device::Device;
use crate::error::{Error, MisuseKind, Result};
use crate::ptr::DevicePtr;
use crate::resource::{MemoryInfo, MemoryResource};
use crate::stream::Stream;

/// The default alignment of the CPU resources: one cache line.
pub const CPU_DEFAULT_ALIGNMENT: usize = 64;

fn check_alignment(resource: &str, alignment: usize) -> Result<()> {
    if alignment.is_power_of_two() && alignment >= std::mem::size_of::<usize>() {
        Ok(())
    } else {
        Err(Error::InvalidArgument {
            reason: format!(
                "{resource} alignment must be a power of two of at least {} bytes, not {alignment}",
                std::mem::size_of::<usize>()
            ),
        })
    }
}

fn out_of_memory(mr: &dyn MemoryResource, nbytes: usize, detail: String) -> Error {
    Error::OutOfMemory {
        device: Device::CPU,
        nbytes,
        chain: crate::resource::resource_chain(mr),
        detail: Some(detail),
    }
}

/// `posix_memalign` / `free` from the C library.
///
/// ```
/// use devmm::mrs::cpu::MallocMemoryResource;
/// let mr = MallocMemoryResource::new();
/// assert_eq!(format!("{mr:?}"), "MallocMemoryResource(device=cpu:0, alignment=64)");
/// assert!(MallocMemoryResource::with_alignment(48).is_err());
/// ```
#[derive(Clone, Copy)]
pub struct MallocMemoryResource {
    alignment: usize,
}

impl MallocMemoryResource {
    /// A resource aligning every pointer to 64 bytes.
    pub const fn new() -> MallocMemoryResource {
        MallocMemoryResource {
            alignment: CPU_DEFAULT_ALIGNMENT,
        }
    }

    /// A resource aligning every pointer to `alignment`, a power of two of at
    /// least the pointer size (what `posix_memalign` accepts).
    pub fn with_alignment(alignment: usize) -> Result<MallocMemoryResource> {
        check_alignment("MallocMemoryResource", alignment)?;
        Ok(MallocMemoryResource { alignment })
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

impl MemoryResource for MallocMemoryResource {
    fn allocate(&self, nbytes: usize, _stream: &Stream) -> Result<DevicePtr> {
        if nbytes == 0 {
            return Ok(DevicePtr::NULL);
        }
        let mut out: *mut libc::c_void = std::ptr::null_mut();
        // SAFETY: `out` is a valid place for the result; the alignment is a
        // power of two multiple of sizeof(void*) (checked at construction).
        let status = unsafe { libc::posix_memalign(&mut out, self.alignment, nbytes) };
        if status != 0 || out.is_null() {
            return Err(out_of_memory(
                self,
                nbytes,
                format!("posix_memalign returned {status}"),
            ));
        }
        Ok(DevicePtr::from_host_ptr(out))
    }

    unsafe fn deallocate(&self, ptr: DevicePtr, _nbytes: usize, _stream: &Stream) -> Result<()> {
        // SAFETY: the caller guarantees `ptr` came from posix_memalign above
        // (or is null, which free accepts) and is freed once.
        unsafe { libc::free(ptr.as_host_ptr()) };
        Ok(())
    }

    fn device(&self) -> Device {
        Device::CPU
    }

    fn guaranteed_alignment(&self) -> usize {
        self.alignment
    }

    fn available_memory(&self) -> Result<MemoryInfo> {
        super::host_memory_info()
    }
}

/// How many of its latest frees the heap resource remembers to tell a
/// double free from an unknown pointer. Bounded so a long run does not grow it.
const FREED_MEMORY: usize = 1024;

#[derive(Default)]
struct HeapState {
    live: HashMap<usize, usize>,
    /// Freed addresses not handed out again since, each with the number of
    /// the free that released it.
    freed: HashMap<usize, u64>,
    /// The latest frees, oldest first. An entry whose address was handed
    /// out again (or freed again later) is stale and only ages out; that
    /// keeps every operation O(1), where pruning the queue on allocation
    /// scanned it.
    free_order: VecDeque<(usize, u64)>,
    frees: u64,
}

impl HeapState {
    fn remember_free(&mut self, addr: usize) {
        self.frees += 1;
        self.freed.insert(addr, self.frees);
        self.free_order.push_back((addr, self.frees));
        if self.free_order.len() > FREED_MEMORY
            && let Some((old, number)) = self.free_order.pop_front()
            && self.freed.get(&old) == Some(&number)
        {
            self.freed.remove(&old);
        }
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
    state: Mutex<HeapState>,
}

impl HeapMemoryResource {
    /// A resource aligning every pointer to 64 bytes.
    pub fn new() -> HeapMemoryResource {
        HeapMemoryResource {
            alignment: CPU_DEFAULT_ALIGNMENT,
            state: Mutex::default(),
        }
    }

    /// A resource aligning every pointer to `alignment` (a power of two).
    pub fn with_alignment(alignment: usize) -> Result<HeapMemoryResource> {
        check_alignment("HeapMemoryResource", alignment)?;
        Ok(HeapMemoryResource {
            alignment,
            state: Mutex::default(),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, HeapState> {
        // The state stays consistent across a panic elsewhere: every update
        // is a single insert or remove.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn misuse(&self, kind: MisuseKind, ptr: DevicePtr, nbytes: usize) -> Error {
        Error::Misuse {
            kind,
            ptr,
            nbytes,
            device: Device::CPU,
            resource: format!("{self:?}"),
        }
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
        let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        for (&addr, &nbytes) in &state.live {
            if let Ok(layout) = AllocLayout::from_size_align(nbytes, self.alignment) {
                // SAFETY: every live entry was allocated with this layout.
                unsafe { std::alloc::dealloc(addr as *mut u8, layout) };
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
        let mut state = self.state();
        state.live.insert(raw as usize, nbytes);
        state.freed.remove(&(raw as usize));
        Ok(DevicePtr::from_host_ptr(raw))
    }

    unsafe fn deallocate(&self, ptr: DevicePtr, nbytes: usize, _stream: &Stream) -> Result<()> {
        if ptr.is_null() && nbytes == 0 {
            return Ok(());
        }
        let mut state = self.state();
        match state.live.get(&ptr.addr()) {
            None if state.freed.contains_key(&ptr.addr()) => {
                Err(self.misuse(MisuseKind::DoubleFree, ptr, nbytes))
            }
            None => Err(self.misuse(MisuseKind::UnknownPointer, ptr, nbytes)),
            Some(&allocated) if allocated != nbytes => {
                Err(self.misuse(MisuseKind::WrongSize { allocated }, ptr, nbytes))
            }
            Some(_) => {
                // A live entry's layout was valid when it was allocated.
                let Ok(layout) = AllocLayout::from_size_align(nbytes, self.alignment) else {
                    return Err(self.misuse(MisuseKind::UnknownPointer, ptr, nbytes));
                };
                state.live.remove(&ptr.addr());
                state.remember_free(ptr.addr());
                // SAFETY: the pointer is live in our table with this size, so
                // it came from `alloc(layout)` and has not been freed.
                unsafe { std::alloc::dealloc(ptr.as_host_ptr(), layout) };
                Ok(())
            }
        }
    }

    fn device(&self) -> Device {
        Device::CPU
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
        Some(self.state().live.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heap_remembers_the_latest_frees_and_no_more() {
        let mut state = HeapState::default();
        // Freed, handed out again, freed again: the first free's queue entry
        // is stale and must not erase the second when it ages out.
        state.remember_free(0x40);
        state.freed.remove(&0x40);
        state.remember_free(0x40);
        for i in 0..FREED_MEMORY - 1 {
            state.remember_free(0x1000 + 64 * i);
        }
        assert!(state.freed.contains_key(&0x40), "the second free is recent");
        state.remember_free(0x80);
        assert!(!state.freed.contains_key(&0x40), "past FREED_MEMORY frees");
        assert_eq!(state.freed.len(), FREED_MEMORY);
        assert_eq!(state.free_order.len(), FREED_MEMORY);
    }
}
