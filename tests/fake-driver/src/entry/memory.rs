//! Allocation, release and copies: `*Malloc`, `*MallocAsync`, pinned host and managed memory,
//! their frees, `*Memcpy` and `*MemcpyAsync`. Device bytes are charged to a device and refused
//! past its limit; a zero-byte request succeeds with a null pointer and charges nothing.
//!
//! ```
//! use fake_driver::{entry::memory, Platform};
//! let p = &Platform::EXAMPLE;
//! let mut ptr = std::ptr::null_mut();
//! // SAFETY: `ptr` is valid for a write.
//! assert_eq!(unsafe { memory::malloc(p, "cudaMalloc", &mut ptr, 1000) }, 0);
//! assert_eq!(ptr as usize % 256, 0);
//! // More than the default 1 GiB limit: out of memory.
//! // SAFETY: as above.
//! assert_eq!(unsafe { memory::malloc(p, "cudaMalloc", &mut ptr, 2 << 30) }, 2);
//! assert_eq!(memory::free(p, "cudaFree", ptr), 0);
//! assert_eq!(memory::free(p, "cudaFree", ptr), 1, "double free is an invalid value");
//! ```

use std::ffi::{c_int, c_void};
use std::ptr;

use crate::call::{Args, Call};
use crate::memory::{Allocation, Kind};
use crate::out::Out;
use crate::platform::{Fault, Platform};
use crate::queue::{Job, Marker};
use crate::state::{self, State};
use crate::stream;

/// The frees that accept device-side blocks.
const DEVICE_KINDS: &[Kind] = &[Kind::Device, Kind::Managed];

/// `cudaMemcpyKind` / `hipMemcpyKind`: host-to-host 0, host-to-device 1, device-to-host 2,
/// device-to-device 3, default (inferred from the pointers) 4.
const MEMCPY_DEFAULT: c_int = 4;

/// `cudaMalloc(void** devPtr, size_t size)` on the current device.
///
/// # Safety
/// `ptr` is null or valid for a write.
pub unsafe fn malloc(
    platform: &'static Platform,
    name: &'static str,
    ptr: *mut *mut c_void,
    size: usize,
) -> c_int {
    Call::new(platform, name)
        .arg("size", size)
        .run(|state, args| {
            // SAFETY: this function's contract.
            let out = unsafe { Out::new(ptr) }?;
            // Not stream-ordered: a capture cannot record it.
            state.captures.check_unsafe_call()?;
            let device = state.devices.current_with_context()?;
            // Mapped from the device's shareable file, so `*IpcGetMemHandle` can export it.
            let shareable = Some(platform.device_name);
            allocate(
                state,
                args,
                out,
                Kind::Device,
                size,
                Some(device),
                shareable,
            )
            .map(drop)
        })
}

/// `cudaMallocAsync(void** devPtr, size_t size, cudaStream_t stream)` on the stream's device.
///
/// # Safety
/// `ptr` is null or valid for a write.
pub unsafe fn malloc_async(
    platform: &'static Platform,
    name: &'static str,
    ptr: *mut *mut c_void,
    size: usize,
    stream: *mut c_void,
) -> c_int {
    Call::new(platform, name)
        .arg("size", size)
        .arg_hex("stream", stream as usize)
        .run(|state, args| {
            // SAFETY: this function's contract.
            let out = unsafe { Out::new(ptr) }?;
            let target = stream::resolve(state, platform, stream)?;
            if !state.devices.pools_supported(target.device)? {
                return Err(Fault::NotSupported);
            }
            let capture = graph_allocation(state, target.key)?;
            let block = allocate(
                state,
                args,
                out,
                Kind::Device,
                size,
                Some(target.device),
                None,
            )?;
            if let Some(capture) = capture {
                state.memory.set_graph(block, capture);
            }
            Ok(())
        })
}

/// Pinned host memory: `cudaMallocHost(void** ptr, size_t size)` (flags 0) or
/// `hipHostMalloc(void** ptr, size_t size, unsigned int flags)`. Charged to no device.
///
/// # Safety
/// `ptr` is null or valid for a write.
pub unsafe fn malloc_host(
    platform: &'static Platform,
    name: &'static str,
    ptr: *mut *mut c_void,
    size: usize,
    flags: u32,
) -> c_int {
    Call::new(platform, name)
        .arg("size", size)
        .arg("flags", flags)
        .run(|state, args| {
            // SAFETY: this function's contract.
            let out = unsafe { Out::new(ptr) }?;
            // Not stream-ordered: a capture cannot record it.
            state.captures.check_unsafe_call()?;
            if flags & !platform.host_alloc_flags != 0 {
                return Err(Fault::InvalidValue);
            }
            allocate(state, args, out, Kind::Host, size, None, None).map(drop)
        })
}

/// `cudaMallocManaged(void** devPtr, size_t size, unsigned int flags)`: flags must be attach
/// global or attach host; charged to the current device so memory info stays predictable.
///
/// # Safety
/// `ptr` is null or valid for a write.
pub unsafe fn malloc_managed(
    platform: &'static Platform,
    name: &'static str,
    ptr: *mut *mut c_void,
    size: usize,
    flags: u32,
) -> c_int {
    Call::new(platform, name)
        .arg("size", size)
        .arg("flags", flags)
        .run(|state, args| {
            // SAFETY: this function's contract.
            let out = unsafe { Out::new(ptr) }?;
            // Not stream-ordered: a capture cannot record it.
            state.captures.check_unsafe_call()?;
            if !platform.managed_flags.contains(&flags) {
                return Err(Fault::InvalidValue);
            }
            let device = state.devices.current_with_context()?;
            allocate(state, args, out, Kind::Managed, size, Some(device), None).map(drop)
        })
}

/// `cudaFree(void* devPtr)`: device or managed blocks; null is a no-op.
pub fn free(platform: &'static Platform, name: &'static str, ptr: *mut c_void) -> c_int {
    free_synchronously(platform, name, ptr, DEVICE_KINDS)
}

/// The synchronous frees (`*Free`, `*FreeHost`) synchronize the device first, as on hardware:
/// the block is retired once all work queued so far has run. Except a pool's block (and a
/// pointer imported from another process's pool), for which the reference says "this API will
/// not perform any implicit synchronization [...]. Callers must ensure that all accesses to
/// these pointer have completed before invoking cudaFree": it is retired at once, so work still
/// queued on it reads poison, or, for an imported pointer, whose mapping goes, faults.
fn free_synchronously(
    platform: &'static Platform,
    name: &'static str,
    ptr: *mut c_void,
    kinds: &'static [Kind],
) -> c_int {
    let mut freed = None;
    let mut pending = Vec::new();
    let code = Call::new(platform, name)
        .arg_hex("ptr", ptr as usize)
        .run(|state, _| {
            state.captures.check_unsafe_call()?;
            freed = release(state, ptr, kinds)?;
            pending = stream::all_work(state);
            Ok(())
        });
    if let Some(allocation) = freed {
        if allocation.pool.is_none() {
            pending.iter().for_each(Marker::wait);
        }
        retire(allocation);
    }
    code
}

/// The free of `allocation` was reached: a pool's block gives its bytes back to the pool, and
/// the block is poisoned.
fn retire(allocation: Allocation) {
    retire_in(&mut state::lock(), allocation);
}

/// [`retire`] with the state's lock held.
fn retire_in(state: &mut State, allocation: Allocation) {
    if let Some(pool) = allocation.pool {
        let size = u64::try_from(allocation.size()).unwrap_or(u64::MAX);
        state.pools.give_back(pool, &mut state.devices, size);
    }
    state.memory.retire(allocation);
}

/// `cudaFreeAsync(void* devPtr, cudaStream_t stream)`: as [`free`], on a live stream.
pub fn free_async(
    platform: &'static Platform,
    name: &'static str,
    ptr: *mut c_void,
    stream: *mut c_void,
) -> c_int {
    Call::new(platform, name)
        .arg_hex("ptr", ptr as usize)
        .arg_hex("stream", stream as usize)
        .run(|state, _| {
            let target = stream::resolve(state, platform, stream)?;
            if state.captures.status(target.key) != crate::capture::STATUS_NONE {
                // A free node frees only memory an allocation node returned: of this capture's
                // graph, or of another graph (freed when this one runs, once that one has).
                // The block is this graph's from then on, so it leaves the table now.
                let key = target.key;
                if state.memory.graph_of(ptr).is_none() {
                    return Err(state
                        .captures
                        .refuse_on(key, crate::capture::CaptureFault::Unsupported));
                }
                state.captures.capture_work(key)?;
                if let Some(allocation) = release(state, ptr, DEVICE_KINDS)? {
                    retire_in(state, allocation);
                }
                return Ok(());
            }
            // A host pool's blocks are pinned host memory, freed like any pool's block.
            let kinds = if from_host_pool(state, ptr) {
                &[Kind::Host]
            } else {
                DEVICE_KINDS
            };
            if let Some(allocation) = release(state, ptr, kinds)? {
                // The block is poisoned when the stream reaches the free, not before.
                stream::submit(state, &target, Box::new(move || retire(allocation)))?;
            }
            Ok(())
        })
}

/// `cudaFreeHost(void* ptr)`: pinned host blocks only, not a host pool's (freed with
/// `*FreeAsync`); null is a no-op.
pub fn free_host(platform: &'static Platform, name: &'static str, ptr: *mut c_void) -> c_int {
    if from_host_pool(&state::lock(), ptr) {
        return Call::new(platform, name)
            .arg_hex("ptr", ptr as usize)
            .run(|_, _| Err(Fault::InvalidValue));
    }
    free_synchronously(platform, name, ptr, &[Kind::Host])
}

/// Whether `ptr` starts a block of a pool of pinned host memory.
fn from_host_pool(state: &State, ptr: *mut c_void) -> bool {
    state
        .memory
        .find(ptr, 1)
        .is_some_and(|a| a.kind == Kind::Host && a.pool.is_some())
}

/// `cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind)`. Every side
/// the kind calls "device" must lie inside one live device or managed block, and every side
/// it calls "host" outside device blocks (managed and pinned memory are host memory too); the
/// default kind infers each side from the allocation table, on a device with unified
/// addressing only (`fake_set_unified_addressing`), as the real runtime.
///
/// # Safety
/// Host-side pointers are valid for `count` bytes (read for `src`, write for `dst`).
pub unsafe fn memcpy(
    platform: &'static Platform,
    name: &'static str,
    dst: *mut c_void,
    src: *const c_void,
    count: usize,
    kind: c_int,
) -> c_int {
    let mut done = None;
    let code = Call::new(platform, name)
        .arg_hex("dst", dst as usize)
        .arg_hex("src", src as usize)
        .arg("count", count)
        .arg("kind", kind)
        .run(|state, _| {
            state.captures.check_unsafe_call()?;
            // The synchronous copy runs on the legacy stream and returns when it is done.
            let legacy = stream::resolve(state, platform, std::ptr::null_mut())?;
            // SAFETY: this function's contract.
            let job = unsafe { copy(state, dst, src, count, kind) }?;
            stream::submit(state, &legacy, job)?;
            done = Some(legacy.marker());
            Ok(())
        });
    if let Some(done) = done {
        done.wait();
    }
    code
}

/// `cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
/// cudaStream_t stream)`: [`memcpy`] on a live stream, done before returning.
///
/// # Safety
/// As [`memcpy`].
pub unsafe fn memcpy_async(
    platform: &'static Platform,
    name: &'static str,
    dst: *mut c_void,
    src: *const c_void,
    count: usize,
    kind: c_int,
    stream: *mut c_void,
) -> c_int {
    Call::new(platform, name)
        .arg_hex("dst", dst as usize)
        .arg_hex("src", src as usize)
        .arg("count", count)
        .arg("kind", kind)
        .arg_hex("stream", stream as usize)
        .run(|state, _| {
            let target = stream::resolve(state, platform, stream)?;
            // SAFETY: this function's contract.
            let job = unsafe { copy(state, dst, src, count, kind) }?;
            stream::submit(state, &target, job)?;
            Ok(())
        })
}

/// The capture a stream-ordered allocation on `key` becomes an allocation node of, counted as
/// captured work (refused when that capture was invalidated); `None` outside a capture.
pub(crate) fn graph_allocation(
    state: &mut State,
    key: crate::capture::StreamKey,
) -> Result<Option<u64>, Fault> {
    let capture = state.captures.id(key);
    if capture.is_some() {
        state.captures.capture_work(key)?;
    }
    Ok(capture)
}

fn allocate(
    state: &mut State,
    args: &mut Args,
    out: Out<*mut c_void>,
    kind: Kind,
    size: usize,
    device: Option<c_int>,
    shareable: Option<&str>,
) -> Result<*mut c_void, Fault> {
    if let Some(device) = device {
        args.note("device", device);
    }
    if size == 0 {
        out.set(ptr::null_mut());
        return Ok(ptr::null_mut());
    }
    if let Some(device) = device {
        state.devices.reserve(device, size)?;
    }
    let inserted = match (shareable, device) {
        (Some(platform), Some(device)) => state
            .devices
            .physical(device)
            .and_then(|physical| state.legacy.allocate(physical, platform, size))
            .and_then(|mapping| state.memory.insert_shared(mapping, kind, device, None)),
        _ => state.memory.insert(kind, size, device),
    };
    match inserted {
        Ok(block) => {
            out.set(block);
            args.note_hex("ptr", block as usize);
            Ok(block)
        }
        Err(fault) => {
            if let Some(device) = device {
                state.devices.release(device, size);
            }
            Err(fault)
        }
    }
}

/// Takes `ptr`'s block out of the table (null frees nothing); the caller retires it once the
/// work ordered before the free has run.
fn release(
    state: &mut State,
    ptr: *mut c_void,
    kinds: &[Kind],
) -> Result<Option<Allocation>, Fault> {
    if ptr.is_null() {
        return Ok(None);
    }
    if let Some(live) = state.memory.find(ptr, 1) {
        if live.kind == Kind::Device && live.device != Some(state.devices.current()?) {
            // Device memory is freed with its device current.
            return Err(Fault::DeviceMismatch);
        }
    }
    let allocation = state.memory.remove(ptr, kinds)?;
    // A pool's block is charged to the pool's reserve, which `retire` gives it back to.
    if let (Some(device), None) = (allocation.device, allocation.pool) {
        state.devices.release(device, allocation.size());
    }
    Ok(Some(allocation))
}

/// # Safety
/// As [`memcpy`].
/// Checks a copy and returns the job that does it on a stream.
///
/// # Safety
/// Host sides are valid for `count` bytes until the job has run.
unsafe fn copy(
    state: &State,
    dst: *mut c_void,
    src: *const c_void,
    count: usize,
    kind: c_int,
) -> Result<Job, Fault> {
    let on_device = |ptr: *const c_void| {
        state
            .memory
            .find(ptr, 1)
            .is_some_and(|a| a.kind.on_device())
    };
    let (dst_on_device, src_on_device) = match kind {
        0 => (false, false),
        1 => (true, false),
        2 => (false, true),
        3 => (true, true),
        MEMCPY_DEFAULT => {
            if !state.devices.unified_addressing(state.devices.current()?)? {
                return Err(Fault::InvalidMemcpyDirection);
            }
            (on_device(dst), on_device(src))
        }
        _ => return Err(Fault::InvalidMemcpyDirection),
    };
    if count == 0 {
        return Ok(Box::new(|| {}));
    }
    if dst.is_null() || src.is_null() {
        return Err(Fault::InvalidValue);
    }
    for (side, is_device) in [(dst.cast_const(), dst_on_device), (src, src_on_device)] {
        let inside = state
            .memory
            .find(side, count)
            .is_some_and(|a| a.kind.on_device());
        // A host side in device memory is a wrong kind: hardware reads it as host memory
        // (or fails), never as the device memory it is.
        let in_device_memory = state
            .memory
            .find(side, 1)
            .is_some_and(|a| a.kind == Kind::Device);
        if (is_device && !inside) || (!is_device && in_device_memory) {
            return Err(Fault::InvalidValue);
        }
        // A host pool's block is reached by the copying device only with access to the pool.
        let host_pool = state.memory.find(side, count).and_then(|a| a.pool);
        if let Some(pool) = host_pool
            .and_then(|p| state.pools.get(p))
            .filter(|p| p.host)
        {
            if !pool.device_access.contains(&state.devices.current()?) {
                return Err(Fault::InvalidValue);
            }
        }
    }
    let (dst, src) = (dst as usize, src as usize);
    Ok(Box::new(move || {
        // SAFETY: device sides lay inside live blocks of at least `count` bytes when the copy
        // was queued, and freed blocks stay mapped (poisoned) for a while, so a copy that was
        // not ordered before a free reads poison; host sides are valid by this function's
        // contract. `copy` tolerates overlap.
        unsafe {
            ptr::copy(
                ptr::with_exposed_provenance::<u8>(src),
                ptr::with_exposed_provenance_mut::<u8>(dst),
                count,
            )
        };
    }))
}
