//! Memory pools of their own: `*MemPoolCreate`, `*MemPoolDestroy`, `*MallocFromPoolAsync`,
//! `*MemPoolGetAttribute`, `*MemPoolSetAttribute`, `*MemPoolTrimTo`, `*MemPoolSetAccess`. The
//! rules the pools keep are in the crate's `pool` module; the structures the calls read are
//! `cudaMemPoolProps` / `hipMemPoolProps` and `cudaMemAccessDesc` / `hipMemAccessDesc`, laid out
//! alike on both platforms.
//!
//! ```
//! use fake_driver::{entry::pool, Platform};
//! let p = &Platform::EXAMPLE;
//! let props = pool::PoolProps::on_device(0);
//! let mut handle = std::ptr::null_mut();
//! // SAFETY: both pointers are valid.
//! assert_eq!(unsafe { pool::mem_pool_create(p, "cudaMemPoolCreate", &mut handle, (&raw const props).cast()) }, 0);
//! let mut reserved = u64::MAX;
//! // SAFETY: attribute 5 (reserved bytes) is a `u64`.
//! let got = unsafe { pool::mem_pool_get_attribute(p, "cudaMemPoolGetAttribute", handle, 5, (&raw mut reserved).cast()) };
//! assert_eq!((got, reserved), (0, 0));
//! assert_eq!(pool::mem_pool_destroy(p, "cudaMemPoolDestroy", handle), 0);
//! ```
//!
//! A pool of pinned host memory takes a host NUMA node from CUDA 12.2 on and the host as a
//! whole from CUDA 13.0 on, never an IPC handle type; before, the location is an invalid value:
//!
//! ```
//! use fake_driver::{control::fake_set_version, entry::{memory, pool}, Platform};
//! let p = &Platform::EXAMPLE;
//! let create = |location_type, handle_types| {
//!     let props = pool::PoolProps { location_type, handle_types, ..pool::PoolProps::on_device(0) };
//!     let mut handle = std::ptr::null_mut();
//!     // SAFETY: both pointers are valid.
//!     let status = unsafe { pool::mem_pool_create(p, "cudaMemPoolCreate", &mut handle, (&raw const props).cast()) };
//!     (status, handle)
//! };
//! let (numa, host) = (3, 2);
//! fake_set_version(12010, 12010);
//! assert_eq!(create(numa, 0).0, 1, "CUDA 12.1 has no host pools");
//! fake_set_version(12020, 12020);
//! assert_eq!(create(host, 0).0, 1, "the host as a whole only from CUDA 13.0");
//! assert_eq!(create(numa, 1).0, 1, "a host pool has no IPC");
//! let (status, handle) = create(numa, 0);
//! assert_eq!(status, 0);
//! let mut block = std::ptr::null_mut();
//! // SAFETY: `block` is a valid out-parameter; stream 0 is built in.
//! let got = unsafe { pool::malloc_from_pool_async(p, "cudaMallocFromPoolAsync", &mut block, 64, handle, std::ptr::null_mut()) };
//! assert_eq!(got, 0);
//! // The block is host memory: the host writes it.
//! // SAFETY: a live 64-byte block.
//! unsafe { block.cast::<u8>().write_bytes(7, 64) };
//! assert_eq!(memory::free_host(p, "cudaFreeHost", block), 1, "a pool's block is freed async");
//! assert_eq!(memory::free_async(p, "cudaFreeAsync", block, std::ptr::null_mut()), 0);
//! fake_set_version(13000, 13000);
//! assert_eq!(create(host, 0).0, 0);
//! ```

use std::ffi::{c_int, c_void};

use crate::call::Call;
use crate::handle;
use crate::ipc::{Arena, Link};
use crate::memory::Kind;
use crate::out::Out;
use crate::platform::{Fault, Platform};
use crate::pool::{self, Pool, Value};
use crate::stream;

/// `cudaMemAllocationTypePinned` / `hipMemAllocationTypePinned`: the only type pools take.
const ALLOCATION_PINNED: c_int = 1;
/// `cudaMemLocationTypeDevice` / `hipMemLocationTypeDevice`.
const LOCATION_DEVICE: c_int = 1;
/// `cudaMemLocationTypeHost` (the id ignored) and `cudaMemLocationTypeHostNuma` (the id a host
/// NUMA node): pinned host memory, from CUDA 13.0 and 12.2 on.
const LOCATION_HOST: c_int = 2;
const LOCATION_HOST_NUMA: c_int = 3;
/// `cudaMemHandleTypeNone` and `cudaMemHandleTypePosixFileDescriptor` (HIP's are the same):
/// the handle types a pool on Linux may export.
const HANDLE_TYPES: c_int = 0x1;
/// `cudaMemHandleTypePosixFileDescriptor` / `hipMemHandleTypePosixFileDescriptor`.
pub(crate) const HANDLE_POSIX_FD: c_int = 0x1;
/// `cudaMemAccessFlagsProtNone` / `...ProtReadWrite`: what a pool's access may be set to.
const ACCESS_NONE: c_int = 0;
const ACCESS_READ_WRITE: c_int = 3;

/// `cudaMemPoolProps` / `hipMemPoolProps`: 88 bytes; what follows `maxSize` (CUDA's `usage`
/// and both platforms' reserved bytes) must be zero.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PoolProps {
    /// `allocType`: pinned (1).
    pub alloc_type: c_int,
    /// `handleTypes`: none (0) or a POSIX file descriptor (1).
    pub handle_types: c_int,
    /// `location.type`: device (1).
    pub location_type: c_int,
    /// `location.id`: the device ordinal.
    pub location_id: c_int,
    /// `win32SecurityAttributes`: ignored on Linux.
    pub win32: *mut c_void,
    /// `maxSize`: 0 for no limit of the pool's own.
    pub max_size: usize,
    /// Must be zero.
    pub reserved: [u8; 56],
}

impl PoolProps {
    /// Pinned device memory on `device`, no IPC, no maximum size.
    pub fn on_device(device: c_int) -> PoolProps {
        PoolProps {
            alloc_type: ALLOCATION_PINNED,
            handle_types: 0,
            location_type: LOCATION_DEVICE,
            location_id: device,
            win32: std::ptr::null_mut(),
            max_size: 0,
            reserved: [0; 56],
        }
    }
}

/// `cudaMemAccessDesc` / `hipMemAccessDesc`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct AccessDesc {
    location_type: c_int,
    location_id: c_int,
    flags: c_int,
}

/// `cudaMemPoolCreate(cudaMemPool_t* memPool, const cudaMemPoolProps* poolProps)`.
///
/// # Safety
/// `out` is null or valid for a write; `props` is null or points at a [`PoolProps`].
pub unsafe fn mem_pool_create(
    platform: &'static Platform,
    name: &'static str,
    out: *mut *mut c_void,
    props: *const c_void,
) -> c_int {
    Call::new(platform, name).run(|state, args| {
        // SAFETY: this function's contract.
        let out = unsafe { Out::new(out) }?;
        if props.is_null() {
            return Err(Fault::InvalidValue);
        }
        // SAFETY: non-null, and a `PoolProps` by this function's contract.
        let props = unsafe { props.cast::<PoolProps>().read_unaligned() };
        args.note("location_type", props.location_type);
        args.note("device", props.location_id);
        args.note("handle_types", props.handle_types);
        args.note("max_size", props.max_size);
        let valid = props.alloc_type == ALLOCATION_PINNED
            && props.handle_types & !HANDLE_TYPES == 0
            && props.reserved.iter().all(|&b| b == 0);
        if !valid {
            return Err(Fault::InvalidValue);
        }
        let mut max_size = u64::try_from(props.max_size).map_err(|_| Fault::InvalidValue)?;
        let runtime = state.versions.unwrap_or(platform.default_versions).0;
        if platform.max_size_since.is_some_and(|since| runtime < since) {
            // Reserved bytes to this runtime: the limit is not there.
            max_size = 0;
        }
        if props.location_type != LOCATION_DEVICE {
            let created = host_pool(state, platform, &props, max_size)?;
            out.set(handle::to_ptr(created));
            args.note_hex("pool", created);
            return Ok(());
        }
        if !state.devices.pools_supported(props.location_id)? {
            return Err(Fault::NotSupported);
        }
        let mut created = Pool::new(props.location_id, max_size);
        created.marks_zeroed = platform.high_water_marks_zeroed;
        if props.handle_types & HANDLE_POSIX_FD != 0 {
            let physical = state.devices.physical(props.location_id)?;
            let arena = Arena::create(physical, platform.device_name)?;
            created.link = Some(Link::Exporter(arena));
        }
        let created = state.pools.create(created);
        out.set(handle::to_ptr(created));
        args.note_hex("pool", created);
        Ok(())
    })
}

/// A pool of pinned host memory, as the reference allows it: from the platform's
/// `host_pools_since` runtime on (an invalid value before, as an unknown location type), a
/// host NUMA node that exists or (from CUDA 13.0) the host as a whole, and no IPC handle type.
fn host_pool(
    state: &mut crate::state::State,
    platform: &'static Platform,
    props: &PoolProps,
    max_size: u64,
) -> Result<usize, Fault> {
    let runtime = state.versions.unwrap_or(platform.default_versions).0;
    let since = platform.host_pools_since.ok_or(Fault::InvalidValue)?;
    let accepted = match props.location_type {
        LOCATION_HOST_NUMA => {
            runtime >= since && (0..crate::device::HOST_NUMA_NODES).contains(&props.location_id)
        }
        LOCATION_HOST => runtime >= crate::platform::HOST_LOCATION_SINCE,
        _ => false,
    };
    if !accepted || props.handle_types != 0 {
        return Err(Fault::InvalidValue);
    }
    let mut created = Pool::new(0, max_size);
    created.host = true;
    Ok(state.pools.create(created))
}

/// `cudaMemPoolDestroy(cudaMemPool_t memPool)`: at once, or, with blocks still live, once the
/// last is freed (the handle is dead either way).
pub fn mem_pool_destroy(
    platform: &'static Platform,
    name: &'static str,
    pool: *mut c_void,
) -> c_int {
    Call::new(platform, name)
        .arg_hex("pool", pool as usize)
        .run(|state, _| {
            let state = &mut *state;
            state.pools.destroy(pool as usize, &mut state.devices)
        })
}

/// `cudaMallocFromPoolAsync(void** ptr, size_t size, cudaMemPool_t memPool, cudaStream_t
/// stream)`: a block of the pool's device, ordered on a stream of the current device.
///
/// # Safety
/// `ptr` is null or valid for a write.
pub unsafe fn malloc_from_pool_async(
    platform: &'static Platform,
    name: &'static str,
    ptr: *mut *mut c_void,
    size: usize,
    pool: *mut c_void,
    stream: *mut c_void,
) -> c_int {
    Call::new(platform, name)
        .arg("size", size)
        .arg_hex("pool", pool as usize)
        .arg_hex("stream", stream as usize)
        .run(|state, args| {
            // SAFETY: this function's contract.
            let out = unsafe { Out::new(ptr) }?;
            let target = stream::resolve(state, platform, stream)?;
            let state = &mut *state;
            let found = state.pools.get_mut(pool as usize)?;
            let (device, host) = (found.device, found.host);
            if host && state.captures.id(target.key).is_some() {
                // A graph's allocation nodes hold device memory only.
                return Err(state
                    .captures
                    .refuse_on(target.key, crate::capture::CaptureFault::Unsupported));
            }
            args.note("device", device);
            // The reference: imported pools make no new allocations.
            if matches!(found.link, Some(Link::Importer(_))) {
                return Err(Fault::InvalidValue);
            }
            if size == 0 {
                out.set(std::ptr::null_mut());
                return Ok(());
            }
            let capture = super::memory::graph_allocation(state, target.key)?;
            let bytes = u64::try_from(size).map_err(|_| Fault::OutOfMemory)?;
            state.pools.take(pool as usize, &mut state.devices, bytes)?;
            let placed = match &mut state.pools.get_mut(pool as usize)?.link {
                Some(Link::Exporter(arena)) => arena.allocate(size).and_then(|m| {
                    state
                        .memory
                        .insert_shared(m, Kind::Device, device, Some(pool as usize))
                }),
                _ if host => state.memory.insert(Kind::Host, size, None),
                _ => state.memory.insert(Kind::Device, size, Some(device)),
            };
            match placed {
                Ok(block) => {
                    state.memory.set_pool(block, pool as usize);
                    if let Some(capture) = capture {
                        state.memory.set_graph(block, capture);
                    }
                    out.set(block);
                    args.note_hex("ptr", block as usize);
                    Ok(())
                }
                Err(fault) => {
                    state
                        .pools
                        .give_back(pool as usize, &mut state.devices, bytes);
                    Err(fault)
                }
            }
        })
}

/// `cudaMemPoolGetAttribute(cudaMemPool_t memPool, cudaMemPoolAttr attr, void* value)`: a
/// `uint64_t` for the threshold and the reserved and used figures, an `int` for the reuse flags.
///
/// # Safety
/// `value` is null or valid for a write of the attribute's type.
pub unsafe fn mem_pool_get_attribute(
    platform: &'static Platform,
    name: &'static str,
    pool: *mut c_void,
    attr: c_int,
    value: *mut c_void,
) -> c_int {
    Call::new(platform, name)
        .arg_hex("pool", pool as usize)
        .arg("attr", attr)
        .run(|state, args| {
            if value.is_null() {
                return Err(Fault::InvalidValue);
            }
            match state.pools.attribute(pool as usize, attr)? {
                Value::U64(v) => {
                    // SAFETY: a `u64` attribute's value is a `u64` by this function's contract.
                    unsafe { value.cast::<u64>().write_unaligned(v) };
                    args.note("value", v);
                }
                Value::Int(v) => {
                    // SAFETY: an `int` attribute's value is a `c_int`, as above.
                    unsafe { value.cast::<c_int>().write_unaligned(v) };
                    args.note("value", v);
                }
            }
            Ok(())
        })
}

/// `cudaMemPoolSetAttribute(cudaMemPool_t memPool, cudaMemPoolAttr attr, void* value)`: the
/// release threshold, the reuse flags, and 0 to reset a high-water mark; the current figures
/// are read-only (an invalid value).
///
/// # Safety
/// `value` is null or valid for a read of the attribute's type.
pub unsafe fn mem_pool_set_attribute(
    platform: &'static Platform,
    name: &'static str,
    pool: *mut c_void,
    attr: c_int,
    value: *mut c_void,
) -> c_int {
    Call::new(platform, name)
        .arg_hex("pool", pool as usize)
        .arg("attr", attr)
        .run(|state, args| {
            if value.is_null() {
                return Err(Fault::InvalidValue);
            }
            let value = if pool::is_u64(attr) {
                // SAFETY: a `u64` attribute's value is a `u64` by this function's contract.
                Value::U64(unsafe { value.cast::<u64>().read_unaligned() })
            } else {
                // SAFETY: any other attribute's value is read as a `c_int`, as above.
                Value::Int(unsafe { value.cast::<c_int>().read_unaligned() })
            };
            match value {
                Value::U64(v) => args.note("value", v),
                Value::Int(v) => args.note("value", v),
            }
            state.pools.set_attribute(pool as usize, attr, value)
        })
}

/// `cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t minBytesToKeep)`: unused chunks go back to
/// the device until `keep` bytes (or what the live blocks need) stay reserved.
pub fn mem_pool_trim_to(
    platform: &'static Platform,
    name: &'static str,
    pool: *mut c_void,
    keep: usize,
) -> c_int {
    Call::new(platform, name)
        .arg_hex("pool", pool as usize)
        .arg("keep", keep)
        .run(|state, _| {
            let state = &mut *state;
            let keep = u64::try_from(keep).unwrap_or(u64::MAX);
            state.pools.trim(pool as usize, &mut state.devices, keep)
        })
}

/// `cudaMemPoolSetAccess(cudaMemPool_t memPool, const cudaMemAccessDesc* descList, size_t
/// count)`: each entry a device location with no access or read-write access; the pool's own
/// device always keeps read-write access (anything else for it is an invalid value). The log
/// line names each entry (`device=1 flags=3`).
///
/// # Safety
/// `descs` is null or valid for reads of `count` descriptors.
pub unsafe fn mem_pool_set_access(
    platform: &'static Platform,
    name: &'static str,
    pool: *mut c_void,
    descs: *const c_void,
    count: usize,
) -> c_int {
    Call::new(platform, name)
        .arg_hex("pool", pool as usize)
        .arg("count", count)
        .run(|state, args| {
            let owner = state.pools.get_mut(pool as usize)?.device;
            if count > 0 && descs.is_null() {
                return Err(Fault::InvalidValue);
            }
            let descs: Vec<AccessDesc> = (0..count)
                .map(|i| {
                    // SAFETY: `descs` holds `count` descriptors by this
                    // function's contract.
                    unsafe { descs.cast::<AccessDesc>().add(i).read_unaligned() }
                })
                .collect();
            for desc in &descs {
                args.note("device", desc.location_id);
                args.note("flags", desc.flags);
                if desc.location_type != LOCATION_DEVICE
                    || ![ACCESS_NONE, ACCESS_READ_WRITE].contains(&desc.flags)
                    || (desc.location_id == owner && desc.flags != ACCESS_READ_WRITE)
                {
                    return Err(Fault::InvalidValue);
                }
                // The device must exist.
                state.devices.pools_supported(desc.location_id)?;
            }
            let pool = state.pools.get_mut(pool as usize)?;
            if pool.host {
                for desc in &descs {
                    pool.device_access.retain(|&d| d != desc.location_id);
                    if desc.flags == ACCESS_READ_WRITE {
                        pool.device_access.push(desc.location_id);
                    }
                }
            }
            Ok(())
        })
}
