//! CUDA's device types and the status codes devmm treats specially.

use std::ffi::{c_int, c_uint, c_void};
use std::sync::Mutex;

use crate::device::DeviceType;
use crate::runtime::gpu::Status;

use super::sys::CudaRuntimeTable;

/// Device memory first, then pinned host and managed memory, all served by
/// the CUDA runtime with the device's ordinal.
pub(super) const DEVICE_TYPES: &[DeviceType] = &[
    DeviceType::Cuda,
    DeviceType::CudaHost,
    DeviceType::CudaManaged,
];

/// `cudaErrorMemoryAllocation`.
pub(super) const ERROR_MEMORY_ALLOCATION: Status = 2;

/// `cudaErrorNoDevice`: `cudaGetDeviceCount` on a machine without a GPU.
pub(super) const ERROR_NO_DEVICE: Status = 100;

/// `cudaErrorInsufficientDriver`: the library loaded but there is no
/// usable driver behind it (a container without the NVIDIA driver, or one
/// older than the runtime).
pub(super) const ERROR_INSUFFICIENT_DRIVER: Status = 35;

/// `cudaErrorInitializationError`: the driver could not be initialised,
/// which is also every call's answer in a child forked after CUDA started.
pub(super) const ERROR_NOT_INITIALIZED: Status = 3;

/// `cudaDevAttrMemoryPoolsSupported`.
pub(super) const ATTR_MEMORY_POOLS_SUPPORTED: c_int = 115;
/// `cudaDevAttrHostNumaMemoryPoolsSupported` and `cudaDevAttrHostMemoryPoolsSupported`.
pub(super) const ATTR_HOST_POOLS_SUPPORTED: Option<(c_int, c_int)> = Some((142, 144));
/// `cudaDevAttrHostNumaId`.
pub(super) const ATTR_HOST_NUMA_ID: Option<c_int> = Some(134);

/// `cudaDevAttrUnifiedAddressing`: one address space for host and device,
/// which `cudaMemcpyDefault` needs.
pub(super) const ATTR_UNIFIED_ADDRESSING: c_int = 41;

/// `cudaDevAttrComputeCapabilityMajor` and `cudaDevAttrComputeCapabilityMinor`.
pub(super) const ATTR_COMPUTE_CAPABILITY: Option<(c_int, c_int)> = Some((75, 76));

/// `CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active)`.
type PrimaryCtxGetState = unsafe extern "C" fn(c_int, *mut c_uint, *mut c_int) -> c_int;

/// The driver API version asked of `cudaGetDriverEntryPointByVersion`: the
/// function's signature has not changed since CUDA 7.
const ENTRY_POINT_VERSION: c_uint = 12_000;

/// Whether the device `ordinal` has an active primary context, through the
/// driver's `cuDevicePrimaryCtxGetState`, looked up once per runtime
/// library through its driver entry point lookup. `None` where the runtime
/// cannot look it up. The runtime's ordinals are the driver's device
/// handles (`cuDeviceGet` maps them 1:1).
pub(super) fn has_primary_context(table: &CudaRuntimeTable, ordinal: c_int) -> Option<bool> {
    /// Per library, keyed by the address of its `cudaRuntimeGetVersion`.
    static FOUND: Mutex<Vec<(usize, Option<PrimaryCtxGetState>)>> = Mutex::new(Vec::new());
    let key = table.cudaRuntimeGetVersion as usize;
    let state = {
        let mut found = FOUND.lock().unwrap_or_else(|e| e.into_inner());
        match found.iter().find(|(k, _)| *k == key) {
            Some(&(_, state)) => state,
            None => {
                let state = lookup(table);
                found.push((key, state));
                state
            }
        }
    }?;
    let (mut flags, mut active): (c_uint, c_int) = (0, 0);
    // SAFETY: both are valid out-parameters; a bad device is an error code.
    let status = unsafe { state(ordinal, &mut flags, &mut active) };
    (status == 0).then_some(active != 0)
}

fn lookup(table: &CudaRuntimeTable) -> Option<PrimaryCtxGetState> {
    let symbol = c"cuDevicePrimaryCtxGetState";
    let mut found: *mut c_void = std::ptr::null_mut();
    let mut driver_status: c_int = 0;
    // SAFETY: `symbol` is NUL-terminated; `found` and `driver_status` are
    // valid out-parameters; the flags are cudaEnableDefault (0).
    let status = unsafe {
        match (
            table.cudaGetDriverEntryPointByVersion,
            table.cudaGetDriverEntryPoint,
        ) {
            (Some(by_version), _) => by_version(
                symbol.as_ptr(),
                &mut found,
                ENTRY_POINT_VERSION,
                0,
                &mut driver_status,
            ),
            (None, Some(unversioned)) => {
                unversioned(symbol.as_ptr(), &mut found, 0, &mut driver_status)
            }
            (None, None) => return None,
        }
    };
    if status != 0 || driver_status != 0 || found.is_null() {
        // A failed lookup leaves an error behind; it is not the caller's.
        // SAFETY: takes no arguments.
        unsafe { (table.cudaGetLastError)() };
        return None;
    }
    // SAFETY: the driver returned its `cuDevicePrimaryCtxGetState`, whose C
    // signature is `PrimaryCtxGetState`.
    Some(unsafe { std::mem::transmute::<*mut c_void, PrimaryCtxGetState>(found) })
}
