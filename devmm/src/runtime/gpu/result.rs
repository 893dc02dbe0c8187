//! Status codes to [`Error`]s, grouped by noun: every driver call the
//! runtimes make goes through here, so every failure names its call, code,
//! symbolic name, description and device.

use std::ffi::{CStr, c_char, c_int};

use crate::device::Device;
use crate::error::{DriverError, Error, Result};
use crate::runtime::driver::Driver;

use super::calls::Call;
use super::{Platform, Status};

/// `Ok` for success, else the driver error for `call`.
pub(crate) fn check<P: Platform>(
    driver: &Driver<P>,
    call: &'static str,
    status: Status,
    device: Option<Device>,
) -> Result<()> {
    if status == 0 {
        Ok(())
    } else {
        Err(driver_error(driver, call, status, device))
    }
}

/// Clears the runtime's last-error state after a failure devmm handles
/// itself (reports as an `Error`, or treats as an answer): the runtime keeps
/// the last failure per thread until `*GetLastError` reads it, and other
/// libraries in the process (PyTorch, CuPy) check it after their own calls.
/// Sticky errors (a corrupted context) cannot be cleared and stay.
pub(crate) fn clear_last_error<P: Platform>(driver: &Driver<P>) {
    let call = driver.roles().get_last_error;
    // SAFETY: takes no arguments; reading the error resets it.
    unsafe { (call.f)() };
}

/// The driver error for a failed `call`.
pub(crate) fn driver_error<P: Platform>(
    driver: &Driver<P>,
    call: &'static str,
    code: Status,
    device: Option<Device>,
) -> Error {
    clear_last_error(driver);
    let calls = driver.roles();
    Error::Driver {
        device,
        source: DriverError {
            call,
            code,
            name: text(calls.get_error_name, code).unwrap_or_else(|| format!("error {code}")),
            message: text(calls.get_error_string, code)
                .unwrap_or_else(|| "the driver gave no description".into()),
        },
    }
}

fn text(call: Call<unsafe extern "C" fn(Status) -> *const c_char>, code: Status) -> Option<String> {
    // SAFETY: the error-name and error-string functions accept any code and
    // return null or a static NUL-terminated string.
    let ptr = unsafe { (call.f)(code) };
    if ptr.is_null() {
        return None;
    }
    // SAFETY: non-null results point at a static C string (see above).
    let text = unsafe { CStr::from_ptr(ptr) };
    Some(text.to_string_lossy().into_owned())
}

/// Device count, the current device, and memory information.
pub(crate) mod device {
    use super::*;

    /// How many devices the driver reports; "no device" is an error, which
    /// makes the runtime unavailable (`GpuRuntime::from_driver`).
    pub(crate) fn count<P: Platform>(driver: &Driver<P>) -> Result<usize> {
        let call = driver.roles().get_device_count;
        let mut n: c_int = 0;
        // SAFETY: `n` is a valid out-parameter for the call.
        let status = unsafe { (call.f)(&mut n) };
        check(driver, call.name, status, None)?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    /// The current device ordinal of this thread.
    pub(crate) fn get<P: Platform>(driver: &Driver<P>) -> Result<c_int> {
        let call = driver.roles().get_device;
        let mut ordinal: c_int = 0;
        // SAFETY: `ordinal` is a valid out-parameter for the call.
        let status = unsafe { (call.f)(&mut ordinal) };
        check(driver, call.name, status, None)?;
        Ok(ordinal)
    }

    /// Makes `ordinal` current on this thread.
    pub(crate) fn set<P: Platform>(
        driver: &Driver<P>,
        ordinal: c_int,
        device: Option<Device>,
    ) -> Result<()> {
        let call = driver.roles().set_device;
        // SAFETY: the call takes a plain integer; invalid ordinals are errors.
        let status = unsafe { (call.f)(ordinal) };
        check(driver, call.name, status, device)
    }

    /// A device attribute (`*DeviceGetAttribute`).
    pub(crate) fn attribute<P: Platform>(
        driver: &Driver<P>,
        attribute: c_int,
        device: Device,
    ) -> Result<c_int> {
        let call = driver.roles().device_get_attribute;
        let mut value: c_int = 0;
        // SAFETY: `value` is a valid out-parameter; unknown attributes and
        // ordinals are errors.
        let status =
            unsafe { (call.f)(&mut value, attribute, super::super::device::ordinal(device)) };
        check(driver, call.name, status, Some(device))?;
        Ok(value)
    }

    /// The PCI bus id (`0000:1b:00.0`).
    pub(crate) fn pci_bus_id<P: Platform>(driver: &Driver<P>, device: Device) -> Result<String> {
        let call = driver.roles().device_get_pci_bus_id;
        // The id is at most 13 characters ("dddd:bb:dd.f"); room to spare.
        let mut buf = [0 as c_char; 64];
        let len = buf.len() as c_int;
        // SAFETY: `buf` holds `len` writable bytes.
        let status =
            unsafe { (call.f)(buf.as_mut_ptr(), len, super::super::device::ordinal(device)) };
        check(driver, call.name, status, Some(device))?;
        // SAFETY: the call wrote a NUL-terminated string into `buf`; the
        // last byte is still 0 either way.
        Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned())
    }

    /// The device's name, from `*GetDeviceProperties`: only its first
    /// member, `char name[256]`, which every version of the struct starts
    /// with, is read. `None` when the library has no properties call.
    pub(crate) fn name<P: Platform>(driver: &Driver<P>, device: Device) -> Result<Option<String>> {
        let calls = driver.roles();
        let Some(call) = calls
            .get_device_properties_v2
            .or(calls.get_device_properties)
        else {
            return Ok(None);
        };
        // Far larger than any version of the struct (about 1 KiB), zeroed.
        let mut props = vec![0u64; PROPERTIES_WORDS];
        // SAFETY: `props` is writable and larger than the struct the call fills.
        let status = unsafe {
            (call.f)(
                props.as_mut_ptr().cast(),
                super::super::device::ordinal(device),
            )
        };
        check(driver, call.name, status, Some(device))?;
        let bytes: Vec<u8> = props
            .iter()
            .flat_map(|w| w.to_ne_bytes())
            .take(NAME_BYTES)
            .collect();
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(NAME_BYTES);
        Ok(Some(String::from_utf8_lossy(&bytes[..end]).into_owned()))
    }

    /// `cudaDeviceProp::name` / `hipDeviceProp_t::name`: `char[256]`.
    const NAME_BYTES: usize = 256;
    /// 16 KiB of room for the properties struct.
    pub(in crate::runtime::gpu) const PROPERTIES_WORDS: usize = 2048;

    /// What this module assumes of the headers (`{P}` is `cuda` or `hip`),
    /// for `real_headers`.
    #[cfg(all(test, not(miri)))]
    pub(in crate::runtime::gpu) fn header_facts() -> Vec<(&'static str, i128)> {
        vec![
            ("offsetof(DeviceProp_PROBE, name)", 0),
            ("sizeof((((DeviceProp_PROBE*)0)->name))", NAME_BYTES as i128),
            (
                "sizeof(DeviceProp_PROBE) <= sizeof(unsigned long long) * PROBE_PROPERTIES_WORDS",
                1,
            ),
        ]
    }

    /// Waits for all work on the current device, which must be `device`.
    pub(crate) fn synchronize<P: Platform>(driver: &Driver<P>, device: Device) -> Result<()> {
        let call = driver.roles().device_synchronize;
        // SAFETY: takes no arguments.
        let status = unsafe { (call.f)() };
        check(driver, call.name, status, Some(device))
    }

    /// Free and total memory of the current device, which must be `device`.
    pub(crate) fn memory_info<P: Platform>(
        driver: &Driver<P>,
        device: Device,
    ) -> Result<crate::resource::MemoryInfo> {
        let call = driver.roles().mem_get_info;
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: both are valid out-parameters for the call.
        let status = unsafe { (call.f)(&mut free, &mut total) };
        check(driver, call.name, status, Some(device))?;
        Ok(crate::resource::MemoryInfo { free, total })
    }
}

/// Streams: create, destroy, synchronize, and wait through an event.
pub(crate) mod stream {
    use super::*;
    use std::ffi::c_void;

    /// `cudaEventDisableTiming` / `hipEventDisableTiming`: the fastest
    /// events, all a wait needs.
    const EVENT_DISABLE_TIMING: u32 = 0x2;

    /// A new stream on the current device, which must be `device`, with
    /// `flags` (`cudaStreamDefault` 0 synchronizes with the legacy default
    /// stream, the safe choice for code mixing in libraries that use it;
    /// `cudaStreamNonBlocking` 1; HIP's values are the same).
    pub(crate) fn create<P: Platform>(
        driver: &Driver<P>,
        device: Device,
        flags: u32,
    ) -> Result<usize> {
        let call = driver.roles().stream_create_with_flags;
        let mut handle: *mut c_void = std::ptr::null_mut();
        // SAFETY: `handle` is a valid out-parameter for the call.
        let status = unsafe { (call.f)(&mut handle, flags) };
        check(driver, call.name, status, Some(device))?;
        Ok(handle as usize)
    }

    /// Destroys a stream this runtime created.
    pub(crate) fn destroy<P: Platform>(
        driver: &Driver<P>,
        device: Device,
        handle: usize,
    ) -> Result<()> {
        let call = driver.roles().stream_destroy;
        // SAFETY: `handle` came from `create` and is destroyed once (the
        // owning `Stream` calls this from its last drop).
        let status = unsafe { (call.f)(handle as *mut c_void) };
        check(driver, call.name, status, Some(device))
    }

    /// Blocks until the work queued on `handle` has finished.
    pub(crate) fn synchronize<P: Platform>(
        driver: &Driver<P>,
        device: Device,
        handle: usize,
    ) -> Result<()> {
        let call = driver.roles().stream_synchronize;
        // SAFETY: `handle` is a stream of this device (a built-in handle, or
        // one created or wrapped by the runtime).
        let status = unsafe { (call.f)(handle as *mut c_void) };
        check(driver, call.name, status, Some(device))
    }

    /// Whether `handle` is capturing a graph (`*StreamIsCapturing`): an
    /// invalidated capture counts, as the stream is still in capture mode;
    /// so does the legacy default stream while a blocking stream of its
    /// device captures, which it may not be used during (the query answers
    /// `*ErrorStreamCaptureImplicit` and leaves that capture intact).
    /// `false` where the library has no capture (nothing can capture).
    pub(crate) fn is_capturing<P: Platform>(
        driver: &Driver<P>,
        device: Device,
        handle: usize,
    ) -> Result<bool> {
        let Some(call) = driver.roles().stream_is_capturing else {
            return Ok(false);
        };
        let mut status: c_int = 0;
        // SAFETY: `handle` is a stream of this device; `status` is a valid
        // out-parameter for the call.
        let status_code = unsafe { (call.f)(handle as *mut c_void, &mut status) };
        if status_code == ERROR_STREAM_CAPTURE_IMPLICIT {
            clear_last_error(driver);
            return Ok(true);
        }
        check(driver, call.name, status_code, Some(device))?;
        Ok(status != CAPTURE_STATUS_NONE)
    }

    /// `cudaStreamCaptureStatusNone` / `hipStreamCaptureStatusNone`.
    const CAPTURE_STATUS_NONE: c_int = 0;

    /// The id of the capture `handle` belongs to (`*StreamGetCaptureInfo`),
    /// `None` when it captures nothing or the library cannot say.
    pub(crate) fn capture_id<P: Platform>(
        driver: &Driver<P>,
        device: Device,
        handle: usize,
    ) -> Result<Option<u64>> {
        let Some(call) = driver.roles().stream_get_capture_info else {
            return Ok(None);
        };
        let (mut status, mut id): (c_int, u64) = (0, 0);
        let null = std::ptr::null_mut();
        // SAFETY: `handle` is a stream of this device; `status` and `id` are
        // valid out-parameters. The trailing outputs are null: CUDA 13's
        // symbol writes none then, and the CUDA 12 and HIP symbols of this
        // name take only the first three arguments, which the C calling
        // convention lets a caller pass more of (they are ignored).
        let code = unsafe {
            (call.f)(
                handle as *mut c_void,
                &mut status,
                &mut id,
                null,
                null,
                null,
                std::ptr::null_mut(),
            )
        };
        check(driver, call.name, code, Some(device))?;
        Ok((status != CAPTURE_STATUS_NONE).then_some(id))
    }

    /// `cudaErrorStreamCaptureImplicit` / `hipErrorStreamCaptureImplicit`:
    /// the legacy stream was asked for while a blocking stream captures.
    const ERROR_STREAM_CAPTURE_IMPLICIT: Status = 906;

    /// Why the legacy default stream is refused while it is bound by
    /// another stream's capture ([`is_capturing`] answers `true` for it).
    pub(crate) const LEGACY_BOUND: &str = "the legacy default stream cannot be used while a \
        blocking stream of its device is capturing (the driver would invalidate that capture); \
        use a non-blocking stream, or wait for the capture to end";

    /// Whether `handle` names the legacy default stream, which cannot
    /// capture itself: its capture query answers whether another stream's
    /// capture binds it.
    pub(crate) fn is_legacy<P: Platform>(handle: usize) -> bool {
        handle == 0 || handle == P::sentinel_handle(crate::stream::StreamSentinel::LegacyDefault)
    }

    /// What this module assumes of the headers, for `real_headers`.
    #[cfg(all(test, not(miri)))]
    pub(in crate::runtime::gpu) fn header_facts() -> Vec<(&'static str, i128)> {
        vec![
            ("{P}EventDisableTiming", EVENT_DISABLE_TIMING.into()),
            ("{P}StreamCaptureStatusNone", CAPTURE_STATUS_NONE.into()),
            (
                "{P}ErrorStreamCaptureImplicit",
                ERROR_STREAM_CAPTURE_IMPLICIT.into(),
            ),
            (
                "{P}StreamDefault",
                crate::stream::StreamFlags::SyncDefault as i128,
            ),
            (
                "{P}StreamNonBlocking",
                crate::stream::StreamFlags::NonBlocking as i128,
            ),
        ]
    }

    /// A timing-free event on the current device, which must be `device`.
    pub(crate) fn create_event<P: Platform>(driver: &Driver<P>, device: Device) -> Result<usize> {
        let call = driver.roles().event_create_with_flags;
        let mut event: *mut c_void = std::ptr::null_mut();
        // SAFETY: `event` is a valid out-parameter for the call.
        let status = unsafe { (call.f)(&mut event, EVENT_DISABLE_TIMING) };
        check(driver, call.name, status, Some(device))?;
        Ok(event as usize)
    }

    /// Destroys an event `create_event` made.
    pub(crate) fn destroy_event<P: Platform>(
        driver: &Driver<P>,
        device: Device,
        event: usize,
    ) -> Result<()> {
        let call = driver.roles().event_destroy;
        // SAFETY: `event` came from `create_event` and is destroyed once.
        let status = unsafe { (call.f)(event as *mut c_void) };
        check(driver, call.name, status, Some(device))
    }

    /// Makes `consumer` wait for the work queued so far on `producer`:
    /// `event` (of this device) is recorded on the producer, then the
    /// consumer waits on it, in that order. The wait captures the work the
    /// record covered when it is made, so the event can be recorded again
    /// for the next hand-off at once.
    pub(crate) fn wait<P: Platform>(
        driver: &Driver<P>,
        device: Device,
        consumer: usize,
        producer: usize,
        event: usize,
    ) -> Result<()> {
        let calls = driver.roles();
        let event = event as *mut c_void;
        // SAFETY: `event` is a live event of this device; `producer` is a stream of it.
        let status = unsafe { (calls.event_record.f)(event, producer as *mut c_void) };
        check(driver, calls.event_record.name, status, Some(device))?;
        // SAFETY: `consumer` is a stream of this device and `event` is live.
        let status = unsafe { (calls.stream_wait_event.f)(consumer as *mut c_void, event, 0) };
        check(driver, calls.stream_wait_event.name, status, Some(device))
    }
}

/// Allocation and copies.
pub(crate) mod memory {
    use super::*;
    use std::ffi::c_void;

    /// `cudaMemAttachGlobal` / `hipMemAttachGlobal`: managed memory any
    /// stream may use.
    const MEM_ATTACH_GLOBAL: u32 = 0x1;

    /// What this module assumes of the headers, for `real_headers`.
    #[cfg(all(test, not(miri)))]
    pub(in crate::runtime::gpu) fn header_facts() -> Vec<(&'static str, i128)> {
        vec![("{P}MemAttachGlobal", MEM_ATTACH_GLOBAL.into())]
    }

    use crate::copy_kind::CopyKind;

    /// The kind a typed copy on `device`'s stream passes: `natural` for
    /// device memory; `Default` for pinned and managed memory, whose
    /// addresses the driver recognizes itself.
    pub(crate) fn kind_for_device<P: Platform>(device: Device, natural: CopyKind) -> CopyKind {
        if device.ty() == P::DEVICE {
            natural
        } else {
            CopyKind::Default
        }
    }

    /// Which allocator a pointer came from.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) enum Allocator {
        /// `cudaMalloc` / `hipMalloc`.
        Device,
        /// `cudaMallocAsync` / `hipMallocAsync` on a stream, where the driver
        /// has it (else as `Device`).
        DeviceAsync,
        /// `cudaMallocHost` / `hipHostMalloc`.
        Pinned,
        /// `cudaMallocManaged` / `hipMallocManaged`.
        Managed,
        /// `cudaMallocFromPoolAsync` / `hipMallocFromPoolAsync` from the pool
        /// with this handle (a resource's own, made only where the library
        /// has the pool calls), freed with `*FreeAsync`.
        FromPool(usize),
        /// `*MallocFromPoolAsync` from a pool of pinned host memory with
        /// this handle (made only where the library has the pool calls),
        /// freed with `*FreeAsync`.
        HostPool(usize),
    }

    /// Allocates `nbytes` (non-zero) with `allocator` on the current device,
    /// which must be `device`. Returns the call that failed with its status
    /// on failure, so callers can tell out-of-memory from other errors.
    pub(crate) fn allocate<P: Platform>(
        driver: &Driver<P>,
        allocator: Allocator,
        nbytes: usize,
        stream: usize,
    ) -> std::result::Result<*mut c_void, (&'static str, Status)> {
        let calls = driver.roles();
        let mut ptr: *mut c_void = std::ptr::null_mut();
        let from_pool = calls.malloc_from_pool_async;
        // A pool is made only where the library has the pool calls (the
        // table never changes), so `FromPool` falls back like `DeviceAsync`
        // in name only.
        let (name, status) = match (allocator, calls.malloc_async, from_pool) {
            (Allocator::FromPool(pool) | Allocator::HostPool(pool), _, Some(c)) => {
                // SAFETY: `ptr` is a valid out-parameter; `pool` is live and
                // `stream` is a stream of the current device.
                let status =
                    unsafe { (c.f)(&mut ptr, nbytes, pool as *mut c_void, stream as *mut c_void) };
                (c.name, status)
            }
            (Allocator::DeviceAsync, Some(c), _) => {
                // SAFETY: `ptr` is a valid out-parameter; `stream` is a
                // stream of the current device.
                let status = unsafe { (c.f)(&mut ptr, nbytes, stream as *mut c_void) };
                (c.name, status)
            }
            (Allocator::Device | Allocator::DeviceAsync | Allocator::FromPool(_), _, _) => {
                // SAFETY: `ptr` is a valid out-parameter.
                let status = unsafe { (calls.malloc.f)(&mut ptr, nbytes) };
                (calls.malloc.name, status)
            }
            (Allocator::Pinned | Allocator::HostPool(_), _, _) => {
                let (name, status, p) = driver.table().host_malloc(nbytes);
                ptr = p;
                (name, status)
            }
            (Allocator::Managed, _, _) => {
                // SAFETY: `ptr` is a valid out-parameter.
                let status =
                    unsafe { (calls.malloc_managed.f)(&mut ptr, nbytes, MEM_ATTACH_GLOBAL) };
                (calls.malloc_managed.name, status)
            }
        };
        if status == 0 && !ptr.is_null() {
            Ok(ptr)
        } else {
            clear_last_error(driver);
            // A driver that reports success but hands back null for a
            // non-zero size has no memory to give: report it as such.
            Err((
                name,
                if status == 0 {
                    P::ERROR_OUT_OF_MEMORY
                } else {
                    status
                },
            ))
        }
    }

    /// Frees `ptr` with the call matching `allocator`.
    ///
    /// # Safety
    ///
    /// `ptr` came from `allocate` with the same `allocator` and is freed once;
    /// for `DeviceAsync`, `stream` is a stream of the current device.
    pub(crate) unsafe fn free<P: Platform>(
        driver: &Driver<P>,
        allocator: Allocator,
        ptr: *mut c_void,
        stream: usize,
        device: Device,
    ) -> Result<()> {
        let calls = driver.roles();
        // The caller guarantees `ptr` came from the matching allocation
        // call and is freed once; each arm frees it with that call's pair.
        let (call, status) = match (allocator, calls.free_async) {
            (Allocator::DeviceAsync | Allocator::FromPool(_) | Allocator::HostPool(_), Some(c)) => {
                // SAFETY: see above; `stream` is a stream of the current device.
                (c.name, unsafe { (c.f)(ptr, stream as *mut c_void) })
            }
            (Allocator::Pinned | Allocator::HostPool(_), _) => {
                // SAFETY: see above.
                (calls.host_free.name, unsafe { (calls.host_free.f)(ptr) })
            }
            (
                Allocator::Device
                | Allocator::DeviceAsync
                | Allocator::FromPool(_)
                | Allocator::Managed,
                _,
            ) => {
                // SAFETY: see above.
                (calls.free.name, unsafe { (calls.free.f)(ptr) })
            }
        };
        check(driver, call, status, Some(device))
    }

    /// Queues a copy of `nbytes` from `src` to `dst` on `stream`.
    ///
    /// # Safety
    ///
    /// Both ranges are valid for `nbytes` bytes, in the memory `kind` says,
    /// and stay valid until the copy completes on `stream`.
    pub(crate) unsafe fn copy_async<P: Platform>(
        driver: &Driver<P>,
        device: Device,
        dst: *mut c_void,
        src: *const c_void,
        nbytes: usize,
        kind: CopyKind,
        stream: usize,
    ) -> Result<()> {
        if nbytes == 0 {
            return Ok(());
        }
        let call = driver.roles().memcpy_async;
        // SAFETY: the caller guarantees both ranges.
        let status = unsafe { (call.f)(dst, src, nbytes, kind as c_int, stream as *mut c_void) };
        check(driver, call.name, status, Some(device))
    }
}

/// Library versions.
pub(crate) mod version {
    use super::*;

    /// The runtime and driver versions as the library encodes them.
    pub(crate) fn get<P: Platform>(driver: &Driver<P>) -> Result<(i32, i32)> {
        let calls = driver.roles();
        let (mut runtime, mut driver_version) = (0, 0);
        // SAFETY: both are valid out-parameters for their calls.
        let status = unsafe { (calls.runtime_get_version.f)(&mut runtime) };
        check(driver, calls.runtime_get_version.name, status, None)?;
        // SAFETY: as above.
        let status = unsafe { (calls.driver_get_version.f)(&mut driver_version) };
        check(driver, calls.driver_get_version.name, status, None)?;
        Ok((runtime, driver_version))
    }
}

/// Pools of a resource's own: create, destroy, attributes, trim, access.
pub(crate) mod pool {
    use super::*;
    use std::ffi::c_void;

    use crate::pool_statistics::PoolStatistics;

    /// `cudaMemPoolAttr` / `hipMemPoolAttr` (the same values): the `u64`
    /// attributes devmm reads and writes.
    pub(crate) const ATTR_RELEASE_THRESHOLD: c_int = 4;
    const ATTR_RESERVED_CURRENT: c_int = 5;
    const ATTR_RESERVED_HIGH: c_int = 6;
    const ATTR_USED_CURRENT: c_int = 7;
    const ATTR_USED_HIGH: c_int = 8;

    /// `cudaMemAllocationTypePinned`, `cudaMemLocationTypeDevice`,
    /// `cudaMemHandleTypePosixFileDescriptor`, `cudaMemAccessFlagsProtReadWrite`
    /// (HIP's are the same).
    const ALLOCATION_PINNED: c_int = 1;
    const LOCATION_DEVICE: c_int = 1;
    /// `cudaMemLocationTypeHost` (the id ignored) and
    /// `cudaMemLocationTypeHostNuma` (the id a host NUMA node).
    const LOCATION_HOST: c_int = 2;
    const LOCATION_HOST_NUMA: c_int = 3;
    const HANDLE_POSIX_FD: c_int = 1;
    const ACCESS_READ_WRITE: c_int = 3;

    /// `cudaMemPoolProps` / `hipMemPoolProps`: 88 bytes on both platforms;
    /// everything after `maxSize` (CUDA's `usage`, the reserved bytes) is 0.
    #[repr(C)]
    struct Props {
        alloc_type: c_int,
        handle_types: c_int,
        location_type: c_int,
        location_id: c_int,
        win32_security_attributes: *mut c_void,
        max_size: usize,
        reserved: [u8; 56],
    }

    /// `cudaMemAccessDesc` / `hipMemAccessDesc`.
    #[repr(C)]
    struct AccessDesc {
        location_type: c_int,
        location_id: c_int,
        flags: c_int,
    }

    /// What this module assumes of the headers, for `real_headers`: the
    /// values, and every field of the two structs where the header has it.
    #[cfg(all(test, not(miri)))]
    pub(in crate::runtime::gpu) fn header_facts() -> Vec<(&'static str, i128)> {
        use std::mem::{offset_of, size_of};
        let at = |offset: usize| offset as i128;
        vec![
            (
                "{P}MemPoolAttrReleaseThreshold",
                ATTR_RELEASE_THRESHOLD.into(),
            ),
            (
                "{P}MemPoolAttrReservedMemCurrent",
                ATTR_RESERVED_CURRENT.into(),
            ),
            ("{P}MemPoolAttrReservedMemHigh", ATTR_RESERVED_HIGH.into()),
            ("{P}MemPoolAttrUsedMemCurrent", ATTR_USED_CURRENT.into()),
            ("{P}MemPoolAttrUsedMemHigh", ATTR_USED_HIGH.into()),
            ("{P}MemAllocationTypePinned", ALLOCATION_PINNED.into()),
            ("{P}MemLocationTypeDevice", LOCATION_DEVICE.into()),
            (
                "{P}MemHandleTypePosixFileDescriptor",
                HANDLE_POSIX_FD.into(),
            ),
            ("{P}MemAccessFlagsProtReadWrite", ACCESS_READ_WRITE.into()),
            ("sizeof({P}MemPoolProps)", size_of::<Props>() as i128),
            (
                "offsetof({P}MemPoolProps, allocType)",
                at(offset_of!(Props, alloc_type)),
            ),
            (
                "offsetof({P}MemPoolProps, handleTypes)",
                at(offset_of!(Props, handle_types)),
            ),
            (
                "offsetof({P}MemPoolProps, location.type)",
                at(offset_of!(Props, location_type)),
            ),
            (
                "offsetof({P}MemPoolProps, location.id)",
                at(offset_of!(Props, location_id)),
            ),
            (
                "offsetof({P}MemPoolProps, win32SecurityAttributes)",
                at(offset_of!(Props, win32_security_attributes)),
            ),
            (
                "offsetof({P}MemPoolProps, maxSize)",
                at(offset_of!(Props, max_size)),
            ),
            ("sizeof({P}MemAccessDesc)", size_of::<AccessDesc>() as i128),
            (
                "offsetof({P}MemAccessDesc, location.type)",
                at(offset_of!(AccessDesc, location_type)),
            ),
            (
                "offsetof({P}MemAccessDesc, location.id)",
                at(offset_of!(AccessDesc, location_id)),
            ),
            (
                "offsetof({P}MemAccessDesc, flags)",
                at(offset_of!(AccessDesc, flags)),
            ),
        ]
    }

    /// The host locations of CUDA's pinned pools, for `real_headers`.
    #[cfg(all(test, not(miri)))]
    pub(in crate::runtime::gpu) fn host_location_facts() -> Vec<(&'static str, i128)> {
        vec![
            ("cudaMemLocationTypeHost", LOCATION_HOST.into()),
            ("cudaMemLocationTypeHostNuma", LOCATION_HOST_NUMA.into()),
        ]
    }

    /// Whether the library has every call a pool of a resource's own needs.
    pub(crate) fn supported<P: Platform>(driver: &Driver<P>) -> bool {
        let c = driver.roles();
        c.mem_pool_create.is_some()
            && c.mem_pool_destroy.is_some()
            && c.malloc_from_pool_async.is_some()
            && c.free_async.is_some()
            && c.mem_pool_get_attribute.is_some()
            && c.mem_pool_set_attribute.is_some()
            && c.mem_pool_trim_to.is_some()
            && c.mem_pool_set_access.is_some()
    }

    /// `call`, once this process may use the driver (a forked child may
    /// not: the pool is the parent's) and the library has the call.
    fn usable<P: Platform, F>(
        driver: &Driver<P>,
        device: Device,
        call: Option<Call<F>>,
        what: &'static str,
    ) -> Result<Call<F>> {
        driver.owner().check(P::RUNTIME, device)?;
        call.ok_or_else(|| missing(what))
    }

    /// The call a library without pool calls lacks, named for errors.
    fn missing(call: &'static str) -> Error {
        Error::InvalidArgument {
            reason: format!("the GPU library has no {call}; a pool of its own needs it"),
        }
    }

    /// A new pool of device memory on `device`, exportable to other
    /// processes when `ipc`, never above `max_size` bytes (0: no limit).
    pub(crate) fn create<P: Platform>(
        driver: &Driver<P>,
        device: Device,
        max_size: usize,
        ipc: bool,
    ) -> Result<usize> {
        let ordinal = super::super::device::ordinal(device);
        create_at(driver, device, LOCATION_DEVICE, ordinal, max_size, ipc)
    }

    /// A new pool at the location `location_type`/`location_id`.
    fn create_at<P: Platform>(
        driver: &Driver<P>,
        device: Device,
        location_type: c_int,
        location_id: c_int,
        max_size: usize,
        ipc: bool,
    ) -> Result<usize> {
        let call = usable(
            driver,
            device,
            driver.roles().mem_pool_create,
            "memory pool creation",
        )?;
        let props = Props {
            alloc_type: ALLOCATION_PINNED,
            handle_types: if ipc { HANDLE_POSIX_FD } else { 0 },
            location_type,
            location_id,
            win32_security_attributes: std::ptr::null_mut(),
            max_size,
            reserved: [0; 56],
        };
        let mut pool: *mut c_void = std::ptr::null_mut();
        // SAFETY: `pool` is a valid out-parameter; `props` is a complete
        // props struct, read during the call.
        let status = unsafe { (call.f)(&mut pool, std::ptr::from_ref(&props).cast()) };
        check(driver, call.name, status, Some(device))?;
        Ok(pool as usize)
    }

    /// A new pool of pinned host memory for `device` (a `*_host` device):
    /// on the host as a whole where the runtime at `version` takes that,
    /// else on the host NUMA node closest to the first GPU. `None` where
    /// the runtime has no host pools or the system no NUMA node to name;
    /// the driver's refusal is an error, which the caller may fall back
    /// from.
    pub(crate) fn create_host<P: Platform>(
        driver: &Driver<P>,
        device: Device,
        version: i32,
    ) -> Result<Option<usize>> {
        let Some((numa_since, host_since)) = P::HOST_POOLS_SINCE else {
            return Ok(None);
        };
        if version < numa_since || !supported(driver) {
            return Ok(None);
        }
        let host_location = version >= host_since;
        // A device may not take the location though its runtime does; a
        // pool made anyway fails only at its first transfer. The first
        // device answers for the host.
        let gpu = Device::new(P::DEVICE, 0);
        if let Some((numa, host)) = P::ATTR_HOST_POOLS_SUPPORTED {
            let attribute = if host_location { host } else { numa };
            if super::device::attribute(driver, attribute, gpu).unwrap_or(0) == 0 {
                return Ok(None);
            }
        }
        let (location_type, location_id) = if host_location {
            (LOCATION_HOST, 0)
        } else {
            // The node nearest the first GPU (which answers for the host
            // here, as above): a fixed node 0 may be the far socket's, and
            // every copy would cross the interconnect. -1 (no NUMA) leaves
            // no node to name; a driver that cannot say gets node 0.
            let nearest = P::ATTR_HOST_NUMA_ID
                .map_or(Ok(0), |attribute| {
                    super::device::attribute(driver, attribute, gpu)
                })
                .unwrap_or(0);
            if nearest < 0 {
                return Ok(None);
            }
            (LOCATION_HOST_NUMA, nearest)
        };
        // "Their default accessibility will be from the host CPU"
        // (`cudaMemPoolCreate`): without access, a device's copy from or to
        // the pool's memory fails, so every device gets read-write access,
        // as `cudaMallocHost` memory has.
        let count = u32::try_from(super::device::count(driver)?).unwrap_or(u32::MAX);
        let gpus: Vec<Device> = (0..count).map(|i| Device::new(P::DEVICE, i)).collect();
        let pool = create_at(driver, device, location_type, location_id, 0, false)?;
        // Pinning is slow (the driver locks every page), so freed blocks
        // stay pinned for the next allocation, as a caching host allocator
        // keeps them: with the default threshold of 0 the pool would hand
        // them back at every synchronization.
        let kept = grant_access(driver, device, pool, &gpus)
            .and_then(|()| set_attribute(driver, device, pool, ATTR_RELEASE_THRESHOLD, u64::MAX));
        if let Err(e) = kept {
            destroy(driver, device, pool)?;
            return Err(e);
        }
        Ok(Some(pool))
    }

    /// Destroys `pool`; its memory goes back to the device once the blocks
    /// still live in it are freed.
    pub(crate) fn destroy<P: Platform>(
        driver: &Driver<P>,
        device: Device,
        pool: usize,
    ) -> Result<()> {
        let call = usable(
            driver,
            device,
            driver.roles().mem_pool_destroy,
            "memory pool destruction",
        )?;
        // SAFETY: `pool` came from `create` and is destroyed once (the
        // owning resource's drop).
        let status = unsafe { (call.f)(pool as *mut c_void) };
        check(driver, call.name, status, Some(device))
    }

    /// A `u64` attribute of `pool`.
    fn attribute<P: Platform>(
        driver: &Driver<P>,
        device: Device,
        pool: usize,
        attr: c_int,
    ) -> Result<u64> {
        let call = usable(
            driver,
            device,
            driver.roles().mem_pool_get_attribute,
            "memory pool attributes",
        )?;
        let mut value: u64 = 0;
        // SAFETY: `pool` is live; every attribute asked here is a `u64`.
        let status = unsafe {
            (call.f)(
                pool as *mut c_void,
                attr,
                std::ptr::from_mut(&mut value).cast(),
            )
        };
        check(driver, call.name, status, Some(device))?;
        Ok(value)
    }

    /// Sets a `u64` attribute of `pool`.
    pub(crate) fn set_attribute<P: Platform>(
        driver: &Driver<P>,
        device: Device,
        pool: usize,
        attr: c_int,
        mut value: u64,
    ) -> Result<()> {
        let call = usable(
            driver,
            device,
            driver.roles().mem_pool_set_attribute,
            "memory pool attributes",
        )?;
        // SAFETY: `pool` is live; every attribute set here is a `u64`, read
        // during the call.
        let status = unsafe {
            (call.f)(
                pool as *mut c_void,
                attr,
                std::ptr::from_mut(&mut value).cast(),
            )
        };
        check(driver, call.name, status, Some(device))
    }

    /// The pool's reserved and used figures with their high-water marks.
    pub(crate) fn statistics<P: Platform>(
        driver: &Driver<P>,
        device: Device,
        pool: usize,
    ) -> Result<PoolStatistics> {
        let get = |attr| attribute(driver, device, pool, attr);
        let (reserved, used) = (get(ATTR_RESERVED_CURRENT)?, get(ATTR_USED_CURRENT)?);
        // A mark is never below its figure: HIP's reset makes it 0, and it
        // catches up only at the pool's next allocation.
        Ok(PoolStatistics {
            reserved_bytes: reserved,
            reserved_high_bytes: get(ATTR_RESERVED_HIGH)?.max(reserved),
            used_bytes: used,
            used_high_bytes: get(ATTR_USED_HIGH)?.max(used),
        })
    }

    /// Resets both high-water marks to the current figures (the driver
    /// takes only 0 for them; see [`Platform::HIGH_WATER_RESET_ZEROES`]).
    pub(crate) fn reset_high_water<P: Platform>(
        driver: &Driver<P>,
        device: Device,
        pool: usize,
    ) -> Result<()> {
        set_attribute(driver, device, pool, ATTR_RESERVED_HIGH, 0)?;
        set_attribute(driver, device, pool, ATTR_USED_HIGH, 0)
    }

    /// Hands unused memory back to the device until `keep` bytes stay reserved.
    pub(crate) fn trim<P: Platform>(
        driver: &Driver<P>,
        device: Device,
        pool: usize,
        keep: usize,
    ) -> Result<()> {
        let call = usable(
            driver,
            device,
            driver.roles().mem_pool_trim_to,
            "memory pool trimming",
        )?;
        // SAFETY: `pool` is live; the size is a plain integer.
        let status = unsafe { (call.f)(pool as *mut c_void, keep) };
        check(driver, call.name, status, Some(device))
    }

    /// Gives the devices `peers` read-write access to the pool's memory.
    pub(crate) fn grant_access<P: Platform>(
        driver: &Driver<P>,
        device: Device,
        pool: usize,
        peers: &[Device],
    ) -> Result<()> {
        if peers.is_empty() {
            return Ok(());
        }
        let call = usable(
            driver,
            device,
            driver.roles().mem_pool_set_access,
            "memory pool access",
        )?;
        let descs: Vec<AccessDesc> = peers
            .iter()
            .map(|&peer| AccessDesc {
                location_type: LOCATION_DEVICE,
                location_id: super::super::device::ordinal(peer),
                flags: ACCESS_READ_WRITE,
            })
            .collect();
        // SAFETY: `pool` is live; `descs` holds `descs.len()` descriptors,
        // read during the call.
        let status = unsafe { (call.f)(pool as *mut c_void, descs.as_ptr().cast(), descs.len()) };
        check(driver, call.name, status, Some(device))
    }
}
