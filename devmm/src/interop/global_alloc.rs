//! `GlobalResource`: a devmm resource installed as the process's global
//! allocator (`#[global_allocator]`), so every heap allocation of the
//! program is counted by a devmm stack.
//!
//! ```
//! use devmm::interop::GlobalResource;
//! use devmm::{MallocMemoryResource, StatisticsAdaptor};
//!
//! // In a binary: #[global_allocator]
//! static GLOBAL: GlobalResource<StatisticsAdaptor<MallocMemoryResource>> =
//!     GlobalResource::new(StatisticsAdaptor::new(MallocMemoryResource::new()));
//! assert_eq!(GLOBAL.resource().total_bytes(), 0);
//! ```
//!
//! Caveats:
//!
//! - The resource must be host memory and constructible in a `static`
//!   (a `const fn`), as `MallocMemoryResource` and `StatisticsAdaptor` are.
//! - Allocations made while the resource itself runs (its own bookkeeping,
//!   a subscriber logging from `LoggingAdaptor`, the first use of the CPU
//!   stream) are served by the system allocator and not counted: the
//!   allocator never re-enters the resource on one thread.
//! - Requests aligned above the resource's guarantee go to the system
//!   allocator too.
//! - Each block carries a header (16 bytes, or the alignment if larger)
//!   that records where it came from; statistics count it.
//! - A resource that does not declare its memory
//!   [`dereferenceable`](MemoryResource::dereferenceable) (the constructor
//!   is a `const fn` and cannot ask it) gets every request refused: the
//!   allocation fails rather than write the header to a fake address.
//! - A resource that panics in `allocate` fails that allocation (null);
//!   one that panics in `deallocate` leaks the block: a panic must not
//!   unwind out of a global allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::sync::OnceLock;

use crate::ptr::DevicePtr;
use crate::resource::MemoryResource;
use crate::stream::Stream;

/// Where a block came from, stored in the byte before the user's pointer.
const FROM_RESOURCE: u8 = 0xD1;
const FROM_SYSTEM: u8 = 0x51;

thread_local! {
    /// Set while this thread is inside the resource (or setting up the
    /// stream): nested allocations go to the system allocator.
    static BUSY: Cell<bool> = const { Cell::new(false) };
}

/// Marks the thread busy until dropped; `None` when it already is (or its
/// thread-locals are gone, during thread exit).
struct Busy;

impl Busy {
    fn enter() -> Option<Busy> {
        // `then`, not `then_some`: a `Busy` made eagerly and dropped
        // would clear the flag the outer call set.
        BUSY.try_with(|busy| (!busy.replace(true)).then(|| Busy))
            .ok()
            .flatten()
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let _ = BUSY.try_with(|busy| busy.set(false));
    }
}

/// A devmm resource as the global allocator; see the module docs for the caveats.
#[derive(Debug)]
pub struct GlobalResource<R> {
    resource: R,
    stream: OnceLock<Stream>,
}

impl<R> GlobalResource<R> {
    /// Wraps `resource`; usable in a `static`. Its memory must be
    /// [`dereferenceable`](MemoryResource::dereferenceable) host memory,
    /// checked at each allocation (a `const fn` cannot call the trait):
    /// otherwise every allocation fails.
    pub const fn new(resource: R) -> GlobalResource<R> {
        GlobalResource {
            resource,
            stream: OnceLock::new(),
        }
    }

    /// The wrapped resource (for its statistics).
    pub fn resource(&self) -> &R {
        &self.resource
    }
}

/// The header in front of a block of `layout`, and the whole block's layout.
fn framed(layout: Layout) -> Option<(usize, Layout)> {
    let header = layout.align().max(16);
    let total = layout.size().checked_add(header)?;
    Some((header, Layout::from_size_align(total, layout.align()).ok()?))
}

// SAFETY: every block is framed: `header` bytes (a multiple of the
// alignment) precede the user's pointer, whose preceding byte records the
// origin, so `dealloc` returns the block to the allocator that made it with
// the same size; both allocators return distinct live blocks.
unsafe impl<R: MemoryResource> GlobalAlloc for GlobalResource<R> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some((header, whole)) = framed(layout) else {
            return std::ptr::null_mut();
        };
        let from_resource = layout.align() <= self.resource.guaranteed_alignment();
        let guard = if from_resource { Busy::enter() } else { None };
        let (base, origin) = match guard {
            Some(_busy) => {
                // A panic must not unwind out of `alloc` (undefined
                // behaviour): it fails the allocation instead.
                let allocated = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    if !self.resource.dereferenceable() {
                        return None;
                    }
                    let stream = self.stream.get_or_init(Stream::cpu);
                    self.resource.allocate(whole.size(), stream).ok()
                }));
                match allocated {
                    Ok(Some(p)) if !p.is_null() => (p.as_host_ptr::<u8>(), FROM_RESOURCE),
                    _ => return std::ptr::null_mut(),
                }
            }
            // SAFETY: `whole` has a non-zero size (it includes the header).
            None => (unsafe { System.alloc(whole) }, FROM_SYSTEM),
        };
        if base.is_null() {
            return base;
        }
        // SAFETY: `base` holds `header + size` bytes; the origin byte is the
        // last header byte, inside the block.
        unsafe {
            let user = base.add(header);
            user.sub(1).write(origin);
            user
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let Some((header, whole)) = framed(layout) else {
            return;
        };
        // SAFETY: `ptr` came from `alloc` with `layout`, so the block starts
        // `header` bytes before it and the origin byte precedes it.
        let (base, origin) = unsafe { (ptr.sub(header), ptr.sub(1).read()) };
        if origin == FROM_SYSTEM {
            // SAFETY: allocated by System with `whole` in `alloc`.
            unsafe { System.dealloc(base, whole) };
            return;
        }
        let _busy = Busy::enter();
        // A failure or a panic leaks the block: neither may escape `dealloc`.
        let _ = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let stream = self.stream.get_or_init(Stream::cpu);
            // SAFETY: allocated by the resource with `whole.size()` bytes, freed once.
            unsafe {
                self.resource
                    .deallocate(DevicePtr::from_addr(base as usize), whole.size(), stream)
            }
        }));
    }
}
