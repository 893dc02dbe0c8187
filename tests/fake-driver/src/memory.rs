//! The allocation table: every live block of host memory the fake has handed out, by kind.

use std::alloc::{self, Layout};
use std::collections::BTreeMap;
use std::ffi::{c_int, c_void};
use std::ptr::NonNull;

use crate::ipc::Mapping;
use crate::platform::Fault;

/// Alignment of device and managed allocations, as the CUDA runtime guarantees.
pub(crate) const DEVICE_ALIGNMENT: usize = 256;
/// Pinned host memory is page-locked, so page aligned.
pub(crate) const HOST_ALIGNMENT: usize = 4096;

/// Which allocator made a block, which decides which free function accepts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `*Malloc` / `*MallocAsync`: charged to a device.
    Device,
    /// `*Malloc` with managed flags: charged to the device current at allocation.
    Managed,
    /// Pinned host memory: charged to no device.
    Host,
    /// Another process's `*Malloc` block, mapped by `*IpcOpenMemHandle`: charged to no device
    /// here, released only by `*IpcCloseMemHandle`.
    IpcOpened,
}

impl Kind {
    fn alignment(self) -> usize {
        match self {
            Kind::Device | Kind::Managed => DEVICE_ALIGNMENT,
            Kind::Host | Kind::IpcOpened => HOST_ALIGNMENT,
        }
    }

    /// Device-accessible memory: what a copy's device side must point into.
    pub(crate) fn on_device(self) -> bool {
        matches!(self, Kind::Device | Kind::Managed | Kind::IpcOpened)
    }
}

/// A block the table owns; freed only through [`Memory::remove`] or [`Memory::clear`].
#[derive(Debug)]
struct Block(NonNull<u8>);

// SAFETY: a `Block` is the sole owner of its allocation and is only reached through the state
// mutex, so moving it between threads cannot create unsynchronised access.
unsafe impl Send for Block {}

#[derive(Debug)]
pub(crate) struct Allocation {
    block: Block,
    layout: Layout,
    pub(crate) kind: Kind,
    /// The device the bytes are charged to; `None` for pinned host memory.
    pub(crate) device: Option<c_int>,
    /// The pool (`*MallocFromPoolAsync`) whose reserve holds the bytes; the device is charged
    /// for the reserve, not for the block.
    pub(crate) pool: Option<usize>,
    /// Prefetches and advice given for managed memory, for `*MemRangeGetAttribute`.
    pub(crate) advice: Advice,
    /// A block of an IPC-capable pool, mapped from the pool's file (see `crate::ipc`), rather
    /// than from the host allocator.
    pub(crate) shared: Option<Mapping>,
    /// The capture whose graph allocated the block (a `*MallocAsync` on a capturing stream:
    /// an allocation node); only a free in that same capture may become its free node.
    pub(crate) graph: Option<u64>,
}

/// What `*MemPrefetchAsync` and `*MemAdvise` last set on a managed block. The fake keeps them
/// per allocation, not per page: a range reads what was last set anywhere in its block.
#[derive(Debug, Clone, Default)]
pub(crate) struct Advice {
    /// The last prefetch's target (`-1` the CPU); `None` before any.
    pub(crate) last_prefetch: Option<c_int>,
    pub(crate) read_mostly: bool,
    /// The preferred location (`-1` the CPU); `None` when unset.
    pub(crate) preferred: Option<c_int>,
    /// The processors with accessed-by set, in the order they were set.
    pub(crate) accessed_by: Vec<c_int>,
}

impl Allocation {
    pub(crate) fn size(&self) -> usize {
        self.layout.size()
    }

    /// What the block holds of the host: a mapped block its whole pages (so the quarantine
    /// of `*Malloc` blocks, one mapping each, stays far below the process's mapping limit).
    fn footprint(&self) -> usize {
        self.shared.as_ref().map_or(self.size(), Mapping::len)
    }
}

/// Freed blocks kept mapped (and poisoned) so that work still reading them reads
/// [`POISON`] rather than freed memory; past this many bytes the oldest are released.
const QUARANTINE_BYTES: usize = 64 << 20;
/// What freed memory reads as.
pub(crate) const POISON: u8 = 0xDB;

#[derive(Debug, Default)]
pub(crate) struct Memory {
    /// Keyed by address so a pointer into the middle of a block finds it (see [`Memory::find`]).
    live: BTreeMap<usize, Allocation>,
    /// Freed blocks, oldest first, still mapped (see [`Memory::retire`]).
    quarantine: std::collections::VecDeque<Allocation>,
    quarantined_bytes: usize,
}

impl Memory {
    pub(crate) fn live_count(&self) -> usize {
        self.live.len()
    }

    /// Allocates `size > 0` zeroed bytes. Zeroed rather than left uninitialised so that tests
    /// reading memory nobody wrote stay deterministic and clean under valgrind.
    pub(crate) fn insert(
        &mut self,
        kind: Kind,
        size: usize,
        device: Option<c_int>,
    ) -> Result<*mut c_void, Fault> {
        let layout =
            Layout::from_size_align(size, kind.alignment()).map_err(|_| Fault::OutOfMemory)?;
        if layout.size() == 0 {
            return Err(Fault::InvalidValue);
        }
        // SAFETY: the layout has a non-zero size, checked above.
        let ptr = NonNull::new(unsafe { alloc::alloc_zeroed(layout) }).ok_or(Fault::OutOfMemory)?;
        self.live.insert(
            ptr.as_ptr() as usize,
            Allocation {
                block: Block(ptr),
                layout,
                kind,
                device,
                pool: None,
                advice: Advice::default(),
                shared: None,
                graph: None,
            },
        );
        Ok(ptr.as_ptr().cast())
    }

    /// Records a block mapped from a shareable file (see `crate::ipc`): of an IPC-capable pool
    /// (exported or imported: `pool` names it), or a `*Malloc` block (`Kind::Device`, no pool)
    /// or one opened from another process (`Kind::IpcOpened`).
    pub(crate) fn insert_shared(
        &mut self,
        mapping: Mapping,
        kind: Kind,
        device: c_int,
        pool: Option<usize>,
    ) -> Result<*mut c_void, Fault> {
        let layout = Layout::from_size_align(mapping.size(), crate::ipc::PAGE as usize)
            .map_err(|_| Fault::OutOfMemory)?;
        let ptr = NonNull::new(mapping.ptr()).ok_or(Fault::OutOfMemory)?;
        self.live.insert(
            ptr.as_ptr() as usize,
            Allocation {
                block: Block(ptr),
                layout,
                kind,
                device: Some(device),
                pool,
                advice: Advice::default(),
                shared: Some(mapping),
                graph: None,
            },
        );
        Ok(ptr.as_ptr().cast())
    }

    /// The mapping of the live block starting exactly at `ptr`, if it is a shared one.
    pub(crate) fn shared(&self, ptr: *const c_void) -> Option<&Mapping> {
        self.live.get(&(ptr as usize))?.shared.as_ref()
    }

    /// Records that the live block at `ptr` came from `pool`.
    pub(crate) fn set_pool(&mut self, ptr: *mut c_void, pool: usize) {
        if let Some(allocation) = self.live.get_mut(&(ptr as usize)) {
            allocation.pool = Some(pool);
        }
    }

    /// The capture whose allocation node made the live block starting exactly at `ptr`.
    pub(crate) fn graph_of(&self, ptr: *const c_void) -> Option<u64> {
        self.live.get(&(ptr as usize))?.graph
    }

    /// Records that the live block at `ptr` is an allocation node of the capture `capture`.
    pub(crate) fn set_graph(&mut self, ptr: *mut c_void, capture: u64) {
        if let Some(allocation) = self.live.get_mut(&(ptr as usize)) {
            allocation.graph = Some(capture);
        }
    }

    /// Takes the block starting exactly at `ptr` out of the table if one of `kinds` made it;
    /// anything else (unknown, interior, already freed, wrong allocator) is an invalid value.
    /// The caller hands it to [`Memory::retire`] once the work ordered before the free has run.
    pub(crate) fn remove(&mut self, ptr: *mut c_void, kinds: &[Kind]) -> Result<Allocation, Fault> {
        let address = ptr as usize;
        match self.live.get(&address) {
            // The reference: importers free an exported block before its exporter does.
            Some(allocation)
                if allocation
                    .shared
                    .as_ref()
                    .is_some_and(Mapping::imported_elsewhere) =>
            {
                return Err(Fault::InvalidValue);
            }
            Some(allocation) if kinds.contains(&allocation.kind) => {}
            _ => return Err(Fault::InvalidValue),
        }
        self.live.remove(&address).ok_or(Fault::InvalidValue)
    }

    /// Poisons a freed block and keeps it mapped for a while, so work that was not ordered
    /// before the free reads [`POISON`] (a visible corruption) instead of freed memory.
    pub(crate) fn retire(&mut self, allocation: Allocation) {
        // An importer's free releases its mapping and nothing else: the bytes are the
        // exporter's, still live there.
        if allocation.shared.as_ref().is_some_and(|m| m.imported) {
            release(allocation);
            return;
        }
        // SAFETY: the block is owned by `allocation` and `size` bytes long.
        unsafe { std::ptr::write_bytes(allocation.block.0.as_ptr(), POISON, allocation.size()) };
        self.quarantined_bytes += allocation.footprint();
        self.quarantine.push_back(allocation);
        while self.quarantined_bytes > QUARANTINE_BYTES {
            let Some(oldest) = self.quarantine.pop_front() else {
                break;
            };
            self.quarantined_bytes -= oldest.footprint();
            release(oldest);
        }
    }

    /// The allocation containing all of `[ptr, ptr + len)`, if any.
    pub(crate) fn find(&self, ptr: *const c_void, len: usize) -> Option<&Allocation> {
        let address = ptr as usize;
        let end = address.checked_add(len)?;
        let (&start, allocation) = self.live.range(..=address).next_back()?;
        let block_end = start.checked_add(allocation.size())?;
        (end <= block_end).then_some(allocation)
    }

    /// The managed allocation containing all of `[ptr, ptr + len)`, if any.
    pub(crate) fn find_managed_mut(
        &mut self,
        ptr: *const c_void,
        len: usize,
    ) -> Option<&mut Allocation> {
        let start = self
            .find(ptr, len)
            .filter(|a| a.kind == Kind::Managed)?
            .block
            .0
            .as_ptr() as usize;
        self.live.get_mut(&start)
    }

    /// Frees everything (`fake_reset`, once no queued work can touch memory; the devices are
    /// reset separately).
    pub(crate) fn clear(&mut self) {
        for (_, allocation) in std::mem::take(&mut self.live) {
            release(allocation);
        }
        for allocation in std::mem::take(&mut self.quarantine) {
            release(allocation);
        }
        self.quarantined_bytes = 0;
    }
}

/// Returns a block to the host allocator.
fn release(allocation: Allocation) {
    if allocation.shared.is_some() {
        // Dropping the mapping unmaps it (see `crate::ipc`).
        return;
    }
    // SAFETY: the block was allocated by `insert` with this layout and has left every table,
    // so it is freed exactly once.
    unsafe { alloc::dealloc(allocation.block.0.as_ptr(), allocation.layout) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_aligned_zeroed_and_found_by_interior_range() {
        let mut memory = Memory::default();
        let ptr = memory.insert(Kind::Device, 300, Some(0)).unwrap();
        assert_eq!(ptr as usize % DEVICE_ALIGNMENT, 0);
        // SAFETY: `ptr` is a live 300-byte block.
        let bytes = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), 300) };
        assert!(bytes.iter().all(|&b| b == 0));
        let inside = ptr.cast::<u8>().wrapping_add(100).cast::<c_void>();
        assert!(memory.find(inside, 200).is_some());
        assert!(memory.find(inside, 201).is_none());
        let freed = memory.remove(ptr, &[Kind::Device]).unwrap();
        assert_eq!(memory.live_count(), 0);
        memory.retire(freed);
        // SAFETY: retired blocks stay mapped until `clear`.
        let bytes = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), 300) };
        assert!(bytes.iter().all(|&b| b == POISON));
        memory.clear();
    }

    #[test]
    fn free_checks_the_allocator_and_refuses_double_free() {
        let mut memory = Memory::default();
        let host = memory.insert(Kind::Host, 64, None).unwrap();
        assert_eq!(host as usize % HOST_ALIGNMENT, 0);
        assert_eq!(
            memory.remove(host, &[Kind::Device]).err(),
            Some(Fault::InvalidValue)
        );
        let freed = memory.remove(host, &[Kind::Host]).unwrap();
        memory.retire(freed);
        assert_eq!(
            memory.remove(host, &[Kind::Host]).err(),
            Some(Fault::InvalidValue)
        );
    }

    #[test]
    fn the_quarantine_of_mapped_blocks_stays_below_the_mapping_limit() {
        // Each `*Malloc` block is a mapping; quarantined by their 256 bytes rather than
        // their pages, 64 MiB of them would pass Linux's default 65530 mappings.
        let mut legacy = crate::ipc::Legacy::default();
        let mut memory = Memory::default();
        for _ in 0..70_000 {
            let mapping = legacy.allocate(0, "Fake GPU", 256).unwrap();
            let ptr = memory
                .insert_shared(mapping, Kind::Device, 0, None)
                .unwrap();
            let freed = memory.remove(ptr, &[Kind::Device]).unwrap();
            memory.retire(freed);
        }
        memory.clear();
    }

    #[test]
    fn clear_frees_everything() {
        let mut memory = Memory::default();
        memory.insert(Kind::Managed, 8, Some(1)).unwrap();
        let host = memory.insert(Kind::Host, 8, None).unwrap();
        let freed = memory.remove(host, &[Kind::Host]).unwrap();
        memory.retire(freed);
        memory.clear();
        assert_eq!(memory.live_count(), 0);
    }
}
