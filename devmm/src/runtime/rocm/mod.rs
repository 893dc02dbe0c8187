//! The ROCm runtime, reached through HIP (`libamdhip64`) at run time: no
//! ROCm SDK is needed to build devmm, and a machine without ROCm gets
//! [`Error::RuntimeUnavailable`](crate::Error::RuntimeUnavailable) naming
//! the libraries tried.
//!
//! The function table is generated from `devmm/api/hip.api` by
//! devmm-codegen (see `devmm/build.rs`); `DEVMM_HIP_PATH` overrides the
//! library names with a full path.
//!
//! ```no_run
//! use devmm::runtime::rocm::RocmRuntime;
//! use devmm::{Device, DeviceRuntime, DeviceType};
//! let rt = RocmRuntime::load()?;
//! let gpu = Device::new(DeviceType::Rocm, 0);
//! println!("{} devices; {gpu}: {:?}", rt.device_count()?, rt.memory_info(gpu)?);
//! # Ok::<(), devmm::Error>(())
//! ```

mod device;
mod memory;
pub(crate) mod stream;

use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex};

use crate::device::DeviceType;
use crate::stream::StreamSentinel;

use super::discovery::SearchPath;
use super::gpu::{GpuRuntime, Platform, PlatformResources, Status};
use super::{DeviceRuntime, RuntimeRegistration};

pub use memory::{
    HipAsyncMemoryResource, HipManagedMemoryResource, HipPinnedMemoryResource,
    HipRuntimeMemoryResource,
};

/// The generated table: plain data, never edited by hand. Not every entry
/// is called, and its items are public only to the runtime.
#[allow(dead_code, unreachable_pub)]
mod sys {
    include!(concat!(env!("OUT_DIR"), "/hip.rs"));
}

/// The ROCm runtime: devices, streams, copies and memory through HIP.
pub type RocmRuntime = GpuRuntime<sys::HipTable>;

impl Platform for sys::HipTable {
    const RUNTIME: &'static str = "rocm";
    const DEVICE: DeviceType = DeviceType::Rocm;
    const HOST: DeviceType = DeviceType::RocmHost;
    // DLPack has no managed type for ROCm: managed memory is device memory
    // that the host can also reach.
    const MANAGED: DeviceType = DeviceType::Rocm;
    const DEVICE_TYPES: &'static [DeviceType] = device::DEVICE_TYPES;
    const ERROR_OUT_OF_MEMORY: Status = device::ERROR_OUT_OF_MEMORY;
    const ERROR_NO_DEVICE: Status = device::ERROR_NO_DEVICE;
    const ERROR_INSUFFICIENT_DRIVER: Status = device::ERROR_INSUFFICIENT_DRIVER;
    const ERROR_NOT_INITIALIZED: Status = device::ERROR_NOT_INITIALIZED;
    const ATTR_MEMORY_POOLS_SUPPORTED: c_int = device::ATTR_MEMORY_POOLS_SUPPORTED;
    const ATTR_CONCURRENT_MANAGED_ACCESS: c_int = 9;
    const ATTR_UNIFIED_ADDRESSING: c_int = device::ATTR_UNIFIED_ADDRESSING;
    const ATTR_COMPUTE_CAPABILITY: Option<(c_int, c_int)> = device::ATTR_COMPUTE_CAPABILITY;
    const RESOURCES: PlatformResources = memory::RESOURCES;
    const MEM_LOCATION_SINCE: Option<i32> = None;
    // hipMemPoolCreate takes device locations only: pinned memory is hipHostMalloc's.
    const HOST_POOLS_SINCE: Option<(i32, i32)> = None;
    const MAX_POOL_SIZE_SINCE: Option<i32> = Some(60_200_000);
    const HIGH_WATER_RESET_ZEROES: bool = true;
    const EXPORT_KEEPS_HANDLE: bool = true;
    const ATTR_HOST_POOLS_SUPPORTED: Option<(c_int, c_int)> = None;
    const ATTR_HOST_NUMA_ID: Option<c_int> = None;
    const SEARCH: SearchPath<'static> = SearchPath {
        root_envs: &["ROCM_PATH", "HIP_PATH"],
        default_roots: &["/opt/rocm"],
        lib_dirs: &["lib", "lib64"],
        wheel_dirs: &["_rocm_sdk_core/lib"],
    };

    fn version_text(encoded: i32) -> String {
        // 10_000_000 * major + 100_000 * minor + patch.
        format!(
            "{}.{}.{}",
            encoded / 10_000_000,
            encoded % 10_000_000 / 100_000,
            encoded % 100_000
        )
    }

    fn kernel_driver_version(_library_answer: i32) -> Option<(String, Option<i32>)> {
        // On AMD, hipDriverGetVersion answers HIP's own version; the kernel
        // driver's is the amdgpu module's, which a packaged (DKMS) driver
        // states and an in-tree one does not.
        let text = std::fs::read_to_string("/sys/module/amdgpu/version").ok()?;
        let text = text.trim();
        (!text.is_empty()).then(|| (text.to_owned(), None))
    }

    /// Unknown: HIP creates no context when a device is made current, so
    /// the activation guard always restores the caller's device. Its
    /// `hipDevicePrimaryCtxGetState` cannot say whether the caller chose a
    /// device either: it reports a device active only once memory was
    /// allocated or work queued there (ROCm's clr), not once it was made
    /// current.
    fn has_primary_context(&self, _ordinal: c_int) -> Option<bool> {
        None
    }

    fn host_malloc(&self, nbytes: usize) -> (&'static str, Status, *mut c_void) {
        memory::host_malloc(self, nbytes)
    }

    fn sentinel_handle(which: StreamSentinel) -> usize {
        stream::sentinel_handle(which)
    }

    fn consumer_handle(value: Option<i64>) -> Result<Option<usize>, String> {
        stream::consumer_handle(value)
    }

    fn shared_slot() -> &'static Mutex<Option<Arc<RocmRuntime>>> {
        static SHARED: Mutex<Option<Arc<RocmRuntime>>> = Mutex::new(None);
        &SHARED
    }
}

/// How the registry finds the ROCm runtime: the probe only opens the
/// library, the table is resolved on first `runtime_for`.
pub(crate) fn registration() -> RuntimeRegistration {
    RuntimeRegistration {
        name: "rocm",
        device_types: device::DEVICE_TYPES,
        probe: RocmRuntime::probe,
        load: || Ok(RocmRuntime::load()? as Arc<dyn DeviceRuntime>),
    }
}
