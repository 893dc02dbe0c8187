//! Memory another process can map: the fake's model of pools made with the POSIX file
//! descriptor handle type. Device memory is host memory here, so an IPC-capable pool keeps its
//! blocks in one `memfd` file that a second process maps to read and write the same bytes.
//!
//! The file's layout, which both processes read:
//!
//! - page 0, the pool's header: [`POOL_MAGIC`], the pool's id (the creating process's id in the
//!   high half), the creating process's id, the device ordinal, the platform's device name;
//! - then each block, page aligned: one header page ([`BLOCK_MAGIC`], the block's size, and
//!   the count of processes that imported it, an atomic shared by every mapping) and the
//!   block's bytes.
//!
//! `*MemPoolExportPointer` writes 64 bytes (`cudaMemPoolPtrExportData`): [`POINTER_MAGIC`],
//! the pool's id, the block's offset and its size. The reference's rules the fake keeps: an
//! import names an open descriptor of such a pool from another process (a closed descriptor,
//! any other file, or the pool's own process is an invalid value), a pointer is imported only
//! through the pool it was exported from, and "the imported memory must be freed from all
//! importing processes before being freed in the exporting process": the exporter's free of a
//! block some process still maps is refused (an invalid value) rather than left undefined.

use std::ffi::{c_int, c_void};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::platform::Fault;

/// The page size the fake lays blocks out with (Linux on x86-64 and aarch64 with 4 KiB pages;
/// larger pages are multiples of it, and `mmap` offsets only need to be multiples of the
/// system's page size, checked at creation).
pub(crate) const PAGE: u64 = 4096;
/// `cudaMemPoolPtrExportData` / `hipMemPoolPtrExportData`: 64 opaque bytes.
pub(crate) const EXPORT_DATA_BYTES: usize = 64;
pub(crate) const POOL_MAGIC: u64 = u64::from_le_bytes(*b"FAKEIPCP");
pub(crate) const BLOCK_MAGIC: u64 = u64::from_le_bytes(*b"FAKEIPCB");
pub(crate) const POINTER_MAGIC: u64 = u64::from_le_bytes(*b"FAKEIPCX");
/// Bytes of the platform's device name kept in the pool header, so a HIP process cannot import
/// a CUDA pool.
const PLATFORM_BYTES: usize = 32;

/// The `*Malloc` arenas of this process, one per device, made at the device's first `*Malloc`.
#[derive(Debug, Default)]
pub(crate) struct Legacy {
    arenas: std::collections::HashMap<c_int, Arena>,
    /// Blocks of other processes this one opened, by [`handle_key`]: the pointer and how many
    /// opens are not closed yet.
    pub(crate) opened: std::collections::HashMap<(u64, u64), (usize, u64)>,
}

/// What names a block across processes in a `cudaIpcMemHandle_t`: its arena's id and offset.
pub(crate) fn handle_key(data: &[u8; EXPORT_DATA_BYTES]) -> (u64, u64) {
    let word = |i: usize| u64::from_le_bytes(data[i * 8..i * 8 + 8].try_into().unwrap_or_default());
    (word(1), word(2))
}

impl Legacy {
    /// A block of `size` bytes of the arena of the machine's GPU `device` (its physical
    /// index, which the arena's header carries to importers), the arena made on first use.
    pub(crate) fn allocate(
        &mut self,
        device: c_int,
        platform: &str,
        size: usize,
    ) -> Result<Mapping, Fault> {
        let arena = match self.arenas.entry(device) {
            std::collections::hash_map::Entry::Occupied(found) => found.into_mut(),
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(Arena::create(device, platform)?)
            }
        };
        arena.allocate(size)
    }

    /// The 64-byte `cudaIpcMemHandle_t` of `mapping`, a block of `device`'s arena.
    pub(crate) fn handle(
        &self,
        device: c_int,
        mapping: &Mapping,
    ) -> Option<[u8; EXPORT_DATA_BYTES]> {
        let arena = self.arenas.get(&device)?;
        let mut data = arena.export(mapping);
        data[32..40].copy_from_slice(&own_pid().to_le_bytes());
        data[40..48].copy_from_slice(&i64::from(arena.file.as_raw_fd()).to_le_bytes());
        Some(data)
    }
}

/// Maps the block a `cudaIpcMemHandle_t` names, exported by another process: opens the
/// exporter's arena through `/proc/PID/fd/N`. Returns the mapping and its device; a handle of
/// this process, of a process or block gone, or of another platform is an invalid value.
pub(crate) fn open_handle(
    data: &[u8; EXPORT_DATA_BYTES],
    platform: &str,
) -> Result<(Mapping, c_int), Fault> {
    let word = |i: usize| u64::from_le_bytes(data[i * 8..i * 8 + 8].try_into().unwrap_or_default());
    let (pid, fd) = (word(4), word(5) as i64);
    if pid == 0 || fd < 0 {
        return Err(Fault::InvalidValue);
    }
    // The reference: a handle is opened by other processes; its own uses the pointer.
    if pid == own_pid() {
        return Err(Fault::InvalidValue);
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(format!("/proc/{pid}/fd/{fd}"))
        .map_err(|_| Fault::InvalidValue)?;
    let (imported, device) = Imported::open(file.as_raw_fd(), platform)?;
    let mut pointer = *data;
    pointer[32..].fill(0);
    Ok((imported.import(&pointer)?, device))
}

/// A serial for pool ids, unique within the process; the process id makes them unique across.
static SERIAL: AtomicU64 = AtomicU64::new(1);

/// The file behind an IPC-capable pool, in the process that created it.
#[derive(Debug)]
pub(crate) struct Arena {
    pub(crate) file: Arc<OwnedFd>,
    pub(crate) id: u64,
    /// Where the next block's header page goes: blocks are never placed twice at one offset,
    /// so a process still mapping a freed block never sees a new one there.
    next: u64,
}

/// An imported pool: the other process's file, and the id its pointers carry.
#[derive(Debug)]
pub(crate) struct Imported {
    pub(crate) file: Arc<OwnedFd>,
    pub(crate) id: u64,
}

/// The pool a process imported or exported through; what a pool with a file holds.
#[derive(Debug)]
pub(crate) enum Link {
    Exporter(Arena),
    Importer(Imported),
}

fn os_fault() -> Fault {
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::ENOMEM | libc::ENOSPC | libc::EMFILE | libc::ENFILE) => Fault::OutOfMemory,
        _ => Fault::InvalidValue,
    }
}

fn platform_tag(platform: &str) -> [u8; PLATFORM_BYTES] {
    let mut tag = [0u8; PLATFORM_BYTES];
    let bytes = platform.as_bytes();
    let n = bytes.len().min(PLATFORM_BYTES);
    tag[..n].copy_from_slice(&bytes[..n]);
    tag
}

fn own_pid() -> u64 {
    u64::from(std::process::id())
}

impl Arena {
    /// A new, empty pool file for the machine's GPU `device` (its physical index, which an
    /// importer numbers its own way) of `platform`, its header written.
    pub(crate) fn create(device: c_int, platform: &str) -> Result<Arena, Fault> {
        // SAFETY: `sysconf` reads a constant.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if u64::try_from(page).map_or(true, |p| p == 0 || !PAGE.is_multiple_of(p)) {
            return Err(Fault::NotSupported);
        }
        // SAFETY: the name is a NUL-terminated string; the flags are valid.
        let fd = unsafe { libc::memfd_create(c"fake-driver-ipc-pool".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(os_fault());
        }
        // SAFETY: `memfd_create` returned a new descriptor this value now owns.
        let file = unsafe { OwnedFd::from_raw_fd(fd) };
        let id = (own_pid() << 32) | (SERIAL.fetch_add(1, Ordering::Relaxed) & 0xffff_ffff);
        let mut header = Vec::with_capacity(PAGE as usize);
        header.extend_from_slice(&POOL_MAGIC.to_le_bytes());
        header.extend_from_slice(&id.to_le_bytes());
        header.extend_from_slice(&own_pid().to_le_bytes());
        header.extend_from_slice(&i64::from(device).to_le_bytes());
        header.extend_from_slice(&platform_tag(platform));
        write_at(&file, &header, 0)?;
        Ok(Arena {
            file: Arc::new(file),
            id,
            next: PAGE,
        })
    }

    /// Whether the pool's descriptor still names its file: HIP hands the descriptor itself to
    /// every export, so a caller that closed it left the pool a number that is closed, or by now
    /// another file's.
    pub(crate) fn descriptor_intact(&self) -> bool {
        let mut header = [0u8; 16];
        read_at(&self.file, &mut header, 0).is_ok()
            && header[..8] == POOL_MAGIC.to_le_bytes()
            && header[8..] == self.id.to_le_bytes()
    }

    /// Places a block of `size` bytes in the file and maps it here.
    pub(crate) fn allocate(&mut self, size: usize) -> Result<Mapping, Fault> {
        let offset = self.next;
        let span = span(size)?;
        let end = offset.checked_add(span).ok_or(Fault::OutOfMemory)?;
        let len = i64::try_from(end).map_err(|_| Fault::OutOfMemory)?;
        // SAFETY: the descriptor is open; growing a memfd only extends it with zeroes.
        if unsafe { libc::ftruncate(self.file.as_raw_fd(), len) } != 0 {
            return Err(os_fault());
        }
        let mapping = Mapping::map(&self.file, offset, size, false)?;
        mapping.header()[0].store(BLOCK_MAGIC, Ordering::Relaxed);
        mapping.header()[1].store(size as u64, Ordering::Relaxed);
        self.next = end;
        Ok(mapping)
    }

    /// The 64 bytes another process imports `mapping`'s block with.
    pub(crate) fn export(&self, mapping: &Mapping) -> [u8; EXPORT_DATA_BYTES] {
        let mut data = [0u8; EXPORT_DATA_BYTES];
        for (i, word) in [POINTER_MAGIC, self.id, mapping.offset, mapping.size as u64]
            .into_iter()
            .enumerate()
        {
            data[i * 8..i * 8 + 8].copy_from_slice(&word.to_le_bytes());
        }
        data
    }
}

impl Imported {
    /// Opens the pool behind the descriptor `fd` (the caller keeps `fd`): another process's
    /// IPC pool of the same platform, or an invalid value. Returns the pool and the machine's
    /// GPU it is on (its physical index).
    pub(crate) fn open(fd: c_int, platform: &str) -> Result<(Imported, c_int), Fault> {
        if fd < 0 {
            return Err(Fault::InvalidValue);
        }
        // SAFETY: `fcntl` with F_DUPFD_CLOEXEC on any integer either duplicates an open
        // descriptor or fails with EBADF (a closed one).
        let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
        if dup < 0 {
            return Err(Fault::InvalidValue);
        }
        // SAFETY: `dup` is a new descriptor this value now owns.
        let file = unsafe { OwnedFd::from_raw_fd(dup) };
        let mut header = [0u8; 32 + PLATFORM_BYTES];
        read_at(&file, &mut header, 0)?;
        let word =
            |i: usize| u64::from_le_bytes(header[i * 8..i * 8 + 8].try_into().unwrap_or_default());
        if word(0) != POOL_MAGIC || header[32..] != platform_tag(platform) {
            return Err(Fault::InvalidValue);
        }
        // The reference: a pool's handle is for other processes; its own uses the pool.
        if word(2) == own_pid() {
            return Err(Fault::InvalidValue);
        }
        let device = c_int::try_from(word(3) as i64).map_err(|_| Fault::InvalidValue)?;
        Ok((
            Imported {
                file: Arc::new(file),
                id: word(1),
            },
            device,
        ))
    }

    /// Maps the block `data` names, which must come from this pool; the block counts one
    /// more importer until the mapping drops.
    pub(crate) fn import(&self, data: &[u8; EXPORT_DATA_BYTES]) -> Result<Mapping, Fault> {
        let word =
            |i: usize| u64::from_le_bytes(data[i * 8..i * 8 + 8].try_into().unwrap_or_default());
        let (magic, id, offset, size) = (word(0), word(1), word(2), word(3));
        if magic != POINTER_MAGIC || id != self.id || offset % PAGE != 0 || offset == 0 {
            return Err(Fault::InvalidValue);
        }
        let size = usize::try_from(size).map_err(|_| Fault::InvalidValue)?;
        let end = offset.checked_add(span(size)?).ok_or(Fault::InvalidValue)?;
        // SAFETY: `stat` is plain data the call fills.
        let mut stat: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: the descriptor is open and `stat` valid for a write.
        if unsafe { libc::fstat(self.file.as_raw_fd(), &mut stat) } != 0
            || u64::try_from(stat.st_size).map_or(true, |len| len < end)
        {
            return Err(Fault::InvalidValue);
        }
        let mapping = Mapping::map(&self.file, offset, size, true)?;
        let header = mapping.header();
        if header[0].load(Ordering::Relaxed) != BLOCK_MAGIC
            || header[1].load(Ordering::Relaxed) != size as u64
        {
            return Err(Fault::InvalidValue);
        }
        header[2].fetch_add(1, Ordering::AcqRel);
        Ok(mapping)
    }
}

/// A block's header page and bytes, mapped shared; the bytes start one page in.
#[derive(Debug)]
pub(crate) struct Mapping {
    base: NonNull<c_void>,
    offset: u64,
    size: usize,
    file: Arc<OwnedFd>,
    /// Mapped by an importer: its unmap counts one importer less and leaves the bytes alone.
    pub(crate) imported: bool,
}

// SAFETY: a `Mapping` is the sole owner of its mapping and is only reached through the
// state mutex; the shared header is only touched through atomics.
unsafe impl Send for Mapping {}

/// The header page and the bytes, rounded up to whole pages.
fn span(size: usize) -> Result<u64, Fault> {
    u64::try_from(size)
        .ok()
        .and_then(|s| s.checked_next_multiple_of(PAGE))
        .and_then(|s| s.checked_add(PAGE))
        .ok_or(Fault::OutOfMemory)
}

impl Mapping {
    fn map(
        file: &Arc<OwnedFd>,
        offset: u64,
        size: usize,
        imported: bool,
    ) -> Result<Mapping, Fault> {
        let len = usize::try_from(span(size)?).map_err(|_| Fault::OutOfMemory)?;
        let at = libc::off_t::try_from(offset).map_err(|_| Fault::InvalidValue)?;
        // SAFETY: a fresh shared mapping of an open file at a page-aligned offset, inside the
        // file (checked or sized by the callers); it overlaps nothing of ours.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                at,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(os_fault());
        }
        Ok(Mapping {
            base: NonNull::new(base).ok_or(Fault::OutOfMemory)?,
            offset,
            size,
            file: Arc::clone(file),
            imported,
        })
    }

    /// The mapping's length: the header page and the bytes, in whole pages.
    pub(crate) fn len(&self) -> usize {
        // `map` checked that the span fits.
        usize::try_from(span(self.size).unwrap_or(0)).unwrap_or(0)
    }

    /// The block's magic, size and importer count: words of the shared header page.
    fn header(&self) -> &[AtomicU64; 3] {
        // SAFETY: the mapping starts with a page, page aligned, that lives as long as `self`;
        // every process touches these words only atomically.
        unsafe { &*self.base.as_ptr().cast::<[AtomicU64; 3]>() }
    }

    /// Where the block's bytes start.
    pub(crate) fn ptr(&self) -> *mut u8 {
        self.base.as_ptr().cast::<u8>().wrapping_add(PAGE as usize)
    }

    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// Whether another process still maps the block.
    pub(crate) fn imported_elsewhere(&self) -> bool {
        !self.imported && self.header()[2].load(Ordering::Acquire) > 0
    }
}

impl Drop for Mapping {
    /// Unmaps the block: an importer counts itself out; the exporter also hands the file's
    /// pages back (no importer maps them any more).
    fn drop(&mut self) {
        if self.imported {
            self.header()[2].fetch_sub(1, Ordering::AcqRel);
        } else if let (Ok(at), Ok(len)) = (
            libc::off_t::try_from(self.offset),
            libc::off_t::try_from(self.len()),
        ) {
            // SAFETY: punching a hole in our own file only zeroes those pages. Failure leaves
            // them allocated until the file is closed, which is harmless.
            unsafe {
                libc::fallocate(
                    self.file.as_raw_fd(),
                    libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                    at,
                    len,
                )
            };
        }
        // SAFETY: the mapping is ours, of this length, and nothing uses it after this.
        unsafe { libc::munmap(self.base.as_ptr(), self.len()) };
    }
}

fn write_at(file: &OwnedFd, bytes: &[u8], offset: i64) -> Result<(), Fault> {
    // SAFETY: `bytes` is valid for reads of its length.
    let n = unsafe { libc::pwrite(file.as_raw_fd(), bytes.as_ptr().cast(), bytes.len(), offset) };
    if usize::try_from(n).ok() != Some(bytes.len()) {
        return Err(os_fault());
    }
    Ok(())
}

fn read_at(file: &OwnedFd, bytes: &mut [u8], offset: i64) -> Result<(), Fault> {
    // SAFETY: `bytes` is valid for writes of its length.
    let n = unsafe {
        libc::pread(
            file.as_raw_fd(),
            bytes.as_mut_ptr().cast(),
            bytes.len(),
            offset,
        )
    };
    if usize::try_from(n).ok() != Some(bytes.len()) {
        // Not a file that reads (a socket, a directory), or one too short: not a pool.
        return Err(Fault::InvalidValue);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_is_shared_through_the_file_and_counts_its_importers() {
        let mut arena = Arena::create(0, "Fake GPU").unwrap();
        let block = arena.allocate(100).unwrap();
        let data = arena.export(&block);
        // The same process may not import; pretend to be another by opening the file directly.
        let other = Imported {
            file: Arc::clone(&arena.file),
            id: arena.id,
        };
        let seen = other.import(&data).unwrap();
        // SAFETY: both map the same 100 live bytes.
        unsafe {
            block.ptr().write(7);
            assert_eq!(seen.ptr().read(), 7);
        }
        assert!(block.imported_elsewhere());
        drop(seen);
        assert!(!block.imported_elsewhere());
        let mut forged = data;
        forged[8] ^= 1;
        assert_eq!(other.import(&forged).err(), Some(Fault::InvalidValue));
    }

    #[test]
    fn the_own_process_a_closed_descriptor_and_another_file_are_refused() {
        let arena = Arena::create(1, "Fake GPU").unwrap();
        let fd = arena.file.as_raw_fd();
        assert_eq!(
            Imported::open(fd, "Fake GPU").err(),
            Some(Fault::InvalidValue)
        );
        assert_eq!(
            Imported::open(-1, "Fake GPU").err(),
            Some(Fault::InvalidValue)
        );
        let other = std::fs::File::open("/proc/self/status").unwrap();
        assert_eq!(
            Imported::open(other.as_raw_fd(), "Fake GPU").err(),
            Some(Fault::InvalidValue)
        );
    }

    /// Set in the child process `a_malloc_block_is_opened_by_another_process` starts: the
    /// handle's 64 bytes in hex.
    const LEGACY_CHILD: &str = "FAKE_DRIVER_TEST_LEGACY_IPC_CHILD";

    #[test]
    fn a_malloc_block_is_opened_by_another_process() {
        if let Ok(hex) = std::env::var(LEGACY_CHILD) {
            let mut handle = [0u8; EXPORT_DATA_BYTES];
            for (i, byte) in handle.iter_mut().enumerate() {
                *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
            }
            let (seen, device) = open_handle(&handle, "Fake GPU").unwrap();
            assert_eq!((device, seen.size()), (1, 100));
            // SAFETY: the exporter's 100 live bytes, mapped here.
            unsafe {
                assert_eq!(seen.ptr().read(), 7);
                seen.ptr().write(9);
            }
            // Another platform's process cannot open it.
            assert_eq!(
                open_handle(&handle, "Other GPU").err(),
                Some(Fault::InvalidValue)
            );
            return;
        }
        let mut legacy = Legacy::default();
        let block = legacy.allocate(1, "Fake GPU", 100).unwrap();
        // SAFETY: a live 100-byte block.
        unsafe { block.ptr().write(7) };
        let handle = legacy.handle(1, &block).unwrap();
        assert_eq!(legacy.handle(0, &block), None, "no arena on device 0");
        // The reference: the exporting process uses the pointer, not the handle.
        assert_eq!(
            open_handle(&handle, "Fake GPU").err(),
            Some(Fault::InvalidValue)
        );
        let hex: String = handle.iter().map(|b| format!("{b:02x}")).collect();
        let output = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "ipc::tests::a_malloc_block_is_opened_by_another_process",
            ])
            .env(LEGACY_CHILD, hex)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stdout)
        );
        assert!(String::from_utf8_lossy(&output.stdout).contains("1 passed"));
        // SAFETY: as above; the child's write is visible here.
        assert_eq!(unsafe { block.ptr().read() }, 9);
        // The child exited: its mapping is gone, the exporter may free.
        assert!(!block.imported_elsewhere());
        // A handle naming another process's descriptor we may not open is refused.
        let mut forged = handle;
        forged[32..40].copy_from_slice(&1u64.to_le_bytes());
        assert_eq!(
            open_handle(&forged, "Fake GPU").err(),
            Some(Fault::InvalidValue)
        );
    }
}
