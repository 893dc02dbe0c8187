//! What differs between the CUDA runtime and HIP: status codes, error names, sentinel streams,
//! accepted flags and versions. Everything else is shared behaviour.

use std::ffi::{c_int, CStr};

/// Why a call failed, before the platform turns it into its own status code.
///
/// ```
/// use fake_driver::{Fault, Platform};
/// assert_eq!(Platform::EXAMPLE.code(Err(Fault::OutOfMemory)), 2);
/// assert_eq!(Platform::EXAMPLE.code(Err(Fault::Injected(999))), 999);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// A null out-pointer, unknown flags, an unknown pointer to free, a bad copy range.
    InvalidValue,
    /// The allocation would pass the device's memory limit, or the host is out of memory.
    OutOfMemory,
    /// The fake is configured with zero devices.
    NoDevice,
    /// A device ordinal outside `0..count`.
    InvalidDevice,
    /// A handle the call cannot use (an event recorded on another device's stream, a built-in
    /// stream to destroy).
    InvalidHandle,
    /// A stream or event handle that was never created, or was destroyed: the process aborts in
    /// strict mode (the default), as the real runtime's undefined behaviour may crash it.
    DeadHandle,
    /// A stream or pointer of another device than the calling thread's current one.
    DeviceMismatch,
    /// The device cannot do this (`*MallocAsync` on a device without memory pools).
    NotSupported,
    /// The library has no driver to talk to (a container without the GPU driver).
    InsufficientDriver,
    /// A `cudaMemcpyKind` / `hipMemcpyKind` outside the enumeration.
    InvalidMemcpyDirection,
    /// A call from a process forked after the runtime was initialised in its parent: the
    /// runtime belongs to the process that initialised it.
    NotInitialized,
    /// A status injected with `fake_fail_next`, returned as is.
    Injected(c_int),
    /// A stream capture rule was broken; both platforms give these the same codes.
    Capture(crate::CaptureFault),
}

/// The platform's numeric status code for each [`Fault`].
///
/// ```
/// let codes = fake_driver::Platform::EXAMPLE.codes;
/// assert_eq!((codes.success, codes.invalid_device), (0, 101));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Codes {
    /// `cudaSuccess` / `hipSuccess`.
    pub success: c_int,
    /// `cudaErrorInvalidValue` / `hipErrorInvalidValue`.
    pub invalid_value: c_int,
    /// `cudaErrorMemoryAllocation` / `hipErrorOutOfMemory`.
    pub out_of_memory: c_int,
    /// `cudaErrorNoDevice` / `hipErrorNoDevice`.
    pub no_device: c_int,
    /// `cudaErrorInvalidDevice` / `hipErrorInvalidDevice`.
    pub invalid_device: c_int,
    /// `cudaErrorInvalidResourceHandle` / `hipErrorInvalidHandle`.
    pub invalid_handle: c_int,
    /// `cudaErrorInvalidMemcpyDirection` / `hipErrorInvalidMemcpyDirection`.
    pub invalid_memcpy_direction: c_int,
    /// `cudaErrorUnknown` / `hipErrorUnknown`: returned if the fake itself fails (a caught panic).
    pub unknown: c_int,
    /// `cudaErrorNotSupported` / `hipErrorNotSupported`.
    pub not_supported: c_int,
    /// `cudaErrorInsufficientDriver` / `hipErrorInsufficientDriver`.
    pub insufficient_driver: c_int,
    /// `cudaErrorInitializationError` / `hipErrorNotInitialized`.
    pub not_initialized: c_int,
}

/// One row of the platform's error table, for `cudaGetErrorName` / `cudaGetErrorString`.
///
/// ```
/// let row = fake_driver::ErrorInfo { code: 0, name: c"cudaSuccess", description: c"no error" };
/// assert_eq!(row.name.to_str(), Ok("cudaSuccess"));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ErrorInfo {
    /// The status code.
    pub code: c_int,
    /// Its enumerator name, e.g. `cudaErrorMemoryAllocation`.
    pub name: &'static CStr,
    /// Its human-readable description, e.g. `out of memory`.
    pub description: &'static CStr,
}

/// A platform's dialect of the shared driver behaviour.
///
/// ```
/// let p = fake_driver::Platform::EXAMPLE;
/// assert!(p.is_builtin_stream(0));
/// assert!(!p.is_builtin_stream(0x1000));
/// ```
#[derive(Debug)]
pub struct Platform {
    /// Stream handles that always exist and belong to the calling thread's current device
    /// (CUDA: 0, `cudaStreamLegacy` 1, `cudaStreamPerThread` 2; HIP: 0, `hipStreamPerThread` 2).
    pub builtin_streams: &'static [usize],
    /// Flags accepted by `*StreamCreateWithFlags` (any other bit is an invalid value).
    pub stream_flags: u32,
    /// Flags accepted by `*EventCreateWithFlags`.
    pub event_flags: u32,
    /// Flags accepted by `*StreamWaitEvent`.
    pub wait_flags: u32,
    /// Flags accepted by the pinned host allocator.
    pub host_alloc_flags: u32,
    /// The values `*MallocManaged` accepts (attach global, attach host).
    pub managed_flags: &'static [u32],
    /// Status codes.
    pub codes: Codes,
    /// Names and descriptions of the status codes the fake knows.
    pub errors: &'static [ErrorInfo],
    /// What the name and string functions answer for a code not in `errors`.
    pub unrecognized: ErrorInfo,
    /// `*RuntimeGetVersion` and `*DriverGetVersion` until `fake_set_version` changes them.
    pub default_versions: (c_int, c_int),
    /// The first runtime version whose pools may live in host memory
    /// (`*MemLocationTypeHostNuma`; `*MemLocationTypeHost` from CUDA 13.0);
    /// `None` where no version has host pools.
    pub host_pools_since: Option<c_int>,
    /// Whether `*MemPoolExportToShareableHandle` hands out the pool's own file descriptor, the
    /// same number on every call, which the pool closes when it is destroyed (HIP's
    /// `MemoryPool::Export`), rather than a new one the caller owns and closes (CUDA).
    pub export_keeps_handle: bool,
    /// Whether making a device current activates it (CUDA creates its primary context). HIP's
    /// devices become active, as `hipDevicePrimaryCtxGetState` reports it, only once memory is
    /// allocated or work is queued there; `hipSetDevice` alone leaves them inactive.
    pub set_device_activates: bool,
    /// The first runtime version whose pools honour the props' `maxSize`; before it the bytes
    /// are reserved and ignored (HIP before 6.2 has no such field). `None`: every version.
    pub max_size_since: Option<c_int>,
    /// Whether a pool's high-water marks and its `maxSize` follow HIP's pools (clr
    /// `MemoryPool`): writing 0 to a mark makes it 0, not the current figure, and a pool that
    /// must grow checks the request against its reserved high-water mark, not its reserve, so
    /// one whose mark was reset may grow past `maxSize`. CUDA resets a mark to the current
    /// figure and bounds the reserve.
    pub high_water_marks_zeroed: bool,
    /// Device attribute numbers the fake answers (`cudaDeviceAttr` / `hipDeviceAttribute_t`).
    pub attributes: Attributes,
    /// What `*GetDeviceProperties` names devices (`{name} {ordinal}`).
    pub device_name: &'static str,
}

/// The first CUDA runtime whose pools take `cudaMemLocationTypeHost` (no NUMA node): 13.0;
/// 12.2 to 12.9 name a host NUMA node (`cudaMemLocationTypeHostNuma`).
pub(crate) const HOST_LOCATION_SINCE: c_int = 13000;

/// The attribute numbers of the platform, and the compute capability the fake reports.
#[derive(Debug, Clone, Copy)]
pub struct Attributes {
    /// `cudaDevAttrMemoryPoolsSupported` (115) / `hipDeviceAttributeMemoryPoolsSupported` (88).
    pub memory_pools_supported: c_int,
    /// `cudaDevAttrUnifiedAddressing` (41) / `hipDeviceAttributeUnifiedAddressing` (85).
    pub unified_addressing: c_int,
    /// `cudaDevAttrConcurrentManagedAccess` (89) / `hipDeviceAttributeConcurrentManagedAccess`
    /// (9): per device, see `fake_set_concurrent_managed_access`.
    pub concurrent_managed_access: c_int,
    /// `cudaDevAttrComputeCapabilityMajor` and `...Minor` (75, 76), where the platform has them.
    pub compute_capability: Option<(c_int, c_int)>,
    /// `cudaDevAttrHostNumaMemoryPoolsSupported` and `cudaDevAttrHostMemoryPoolsSupported`
    /// (142, 144), where the platform has host pools: 1 for a device with pools
    /// (`fake_set_pools`) once the runtime version has the location.
    pub host_pools_supported: Option<(c_int, c_int)>,
    /// `cudaDevAttrHostNumaId` (134), where the platform has it: the host NUMA node closest to
    /// the device (`fake_set_host_numa_id`).
    pub host_numa_id: Option<c_int>,
    /// The compute capability the fake's devices report.
    pub capability: (c_int, c_int),
}

impl Platform {
    /// A CUDA-like platform for examples and unit tests of this crate.
    pub const EXAMPLE: Platform = Platform {
        builtin_streams: &[0, 1, 2],
        stream_flags: 0x1,
        event_flags: 0x7,
        wait_flags: 0x1,
        host_alloc_flags: 0,
        managed_flags: &[1, 2],
        codes: Codes {
            success: 0,
            invalid_value: 1,
            out_of_memory: 2,
            no_device: 100,
            invalid_device: 101,
            invalid_handle: 400,
            invalid_memcpy_direction: 21,
            unknown: 999,
            not_supported: 801,
            insufficient_driver: 35,
            not_initialized: 3,
        },
        errors: &[ErrorInfo {
            code: 0,
            name: c"cudaSuccess",
            description: c"no error",
        }],
        unrecognized: ErrorInfo {
            code: -1,
            name: c"unrecognized error code",
            description: c"unrecognized error code",
        },
        default_versions: (12040, 12040),
        host_pools_since: Some(12020),
        export_keeps_handle: false,
        set_device_activates: true,
        max_size_since: None,
        high_water_marks_zeroed: false,
        attributes: Attributes {
            memory_pools_supported: 115,
            unified_addressing: 41,
            concurrent_managed_access: 89,
            compute_capability: Some((75, 76)),
            host_pools_supported: Some((142, 144)),
            host_numa_id: Some(134),
            capability: (9, 0),
        },
        device_name: "Fake GPU",
    };

    /// The status code a call's outcome is reported with.
    ///
    /// ```
    /// assert_eq!(fake_driver::Platform::EXAMPLE.code(Ok(())), 0);
    /// ```
    pub fn code(&self, outcome: Result<(), Fault>) -> c_int {
        let codes = &self.codes;
        match outcome {
            Ok(()) => codes.success,
            Err(Fault::InvalidValue) => codes.invalid_value,
            Err(Fault::OutOfMemory) => codes.out_of_memory,
            Err(Fault::NoDevice) => codes.no_device,
            Err(Fault::InvalidDevice) => codes.invalid_device,
            Err(Fault::InvalidHandle | Fault::DeadHandle | Fault::DeviceMismatch) => {
                codes.invalid_handle
            }
            Err(Fault::NotSupported) => codes.not_supported,
            Err(Fault::InsufficientDriver) => codes.insufficient_driver,
            Err(Fault::InvalidMemcpyDirection) => codes.invalid_memcpy_direction,
            Err(Fault::NotInitialized) => codes.not_initialized,
            Err(Fault::Injected(code)) => code,
            Err(Fault::Capture(fault)) => fault.code(),
        }
    }

    /// Whether `handle` is one of the platform's sentinel streams.
    ///
    /// ```
    /// assert!(fake_driver::Platform::EXAMPLE.is_builtin_stream(2));
    /// ```
    pub fn is_builtin_stream(&self, handle: usize) -> bool {
        self.builtin_streams.contains(&handle)
    }

    /// The error-table row for `code`, or [`Platform::unrecognized`].
    ///
    /// ```
    /// let p = fake_driver::Platform::EXAMPLE;
    /// assert_eq!(p.error_info(0).name.to_str(), Ok("cudaSuccess"));
    /// assert_eq!(p.error_info(12345).name.to_str(), Ok("unrecognized error code"));
    /// ```
    pub fn error_info(&self, code: c_int) -> ErrorInfo {
        self.errors
            .iter()
            .copied()
            .find(|row| row.code == code)
            .unwrap_or(self.unrecognized)
    }
}
