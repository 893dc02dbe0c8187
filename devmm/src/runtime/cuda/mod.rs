//! The CUDA runtime, reached through `libcudart` at run time: no CUDA SDK
//! is needed to build devmm, and a machine without CUDA gets
//! [`Error::RuntimeUnavailable`](crate::Error::RuntimeUnavailable) naming
//! the libraries tried.
//!
//! The function table is generated from `devmm/api/cuda_runtime.api` by
//! devmm-codegen (see `devmm/build.rs`); `DEVMM_CUDART_PATH` overrides the
//! library names with a full path.
//!
//! ```no_run
//! use devmm::runtime::cuda::CudaRuntime;
//! use devmm::{Device, DeviceRuntime, DeviceType};
//! let rt = CudaRuntime::load()?;
//! let gpu = Device::new(DeviceType::Cuda, 0);
//! let info = rt.memory_info(gpu)?;
//! println!("{} devices; {gpu}: {} of {} bytes free", rt.device_count()?, info.free, info.total);
//! # Ok::<(), devmm::Error>(())
//! ```

mod device;
#[cfg(feature = "cudarc")]
pub mod interop;
mod memory;
mod stream;

use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex};

use crate::device::DeviceType;
use crate::stream::StreamSentinel;

use super::discovery::SearchPath;
use super::gpu::{GpuRuntime, Platform, PlatformResources, Status};
use super::{DeviceRuntime, RuntimeRegistration};

pub use memory::{
    CudaAsyncMemoryResource, CudaManagedMemoryResource, CudaPinnedMemoryResource,
    CudaRuntimeMemoryResource,
};

/// The generated table: plain data, never edited by hand. Not every entry
/// is called, and its items are public only to the runtime.
#[allow(dead_code, unreachable_pub)]
mod sys {
    include!(concat!(env!("OUT_DIR"), "/cuda_runtime.rs"));
}

/// The CUDA runtime: devices, streams, copies and memory through libcudart.
pub type CudaRuntime = GpuRuntime<sys::CudaRuntimeTable>;

impl Platform for sys::CudaRuntimeTable {
    const RUNTIME: &'static str = "cuda";
    const DEVICE: DeviceType = DeviceType::Cuda;
    const HOST: DeviceType = DeviceType::CudaHost;
    const MANAGED: DeviceType = DeviceType::CudaManaged;
    const DEVICE_TYPES: &'static [DeviceType] = device::DEVICE_TYPES;
    const ERROR_OUT_OF_MEMORY: Status = device::ERROR_MEMORY_ALLOCATION;
    const ERROR_NO_DEVICE: Status = device::ERROR_NO_DEVICE;
    const ERROR_INSUFFICIENT_DRIVER: Status = device::ERROR_INSUFFICIENT_DRIVER;
    const ERROR_NOT_INITIALIZED: Status = device::ERROR_NOT_INITIALIZED;
    const ATTR_MEMORY_POOLS_SUPPORTED: c_int = device::ATTR_MEMORY_POOLS_SUPPORTED;
    const ATTR_CONCURRENT_MANAGED_ACCESS: c_int = 89;
    const ATTR_UNIFIED_ADDRESSING: c_int = device::ATTR_UNIFIED_ADDRESSING;
    const ATTR_COMPUTE_CAPABILITY: Option<(c_int, c_int)> = device::ATTR_COMPUTE_CAPABILITY;
    const RESOURCES: PlatformResources = memory::RESOURCES;
    const MEM_LOCATION_SINCE: Option<i32> = Some(13000);
    const HOST_POOLS_SINCE: Option<(i32, i32)> = Some((12020, 13000));
    const MAX_POOL_SIZE_SINCE: Option<i32> = None;
    const HIGH_WATER_RESET_ZEROES: bool = false;
    const EXPORT_KEEPS_HANDLE: bool = false;
    const ATTR_HOST_POOLS_SUPPORTED: Option<(c_int, c_int)> = device::ATTR_HOST_POOLS_SUPPORTED;
    const ATTR_HOST_NUMA_ID: Option<c_int> = device::ATTR_HOST_NUMA_ID;
    const SEARCH: SearchPath<'static> = SearchPath {
        root_envs: &["CUDA_PATH", "CUDA_HOME"],
        default_roots: &["/usr/local/cuda"],
        lib_dirs: &["lib64", "lib", "targets/x86_64-linux/lib"],
        // The CUDA 13 wheels (`nvidia-cuda-runtime`), then the CUDA 12 ones.
        wheel_dirs: &["nvidia/cu13/lib", "nvidia/cuda_runtime/lib"],
    };

    fn version_text(encoded: i32) -> String {
        // 1000 * major + 10 * minor.
        format!("{}.{}", encoded / 1000, encoded % 1000 / 10)
    }

    fn kernel_driver_version(library_answer: i32) -> Option<(String, Option<i32>)> {
        // libcuda's answer; 0 when no driver is installed.
        (library_answer > 0).then(|| (Self::version_text(library_answer), Some(library_answer)))
    }

    fn has_primary_context(&self, ordinal: c_int) -> Option<bool> {
        device::has_primary_context(self, ordinal)
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

    fn shared_slot() -> &'static Mutex<Option<Arc<CudaRuntime>>> {
        static SHARED: Mutex<Option<Arc<CudaRuntime>>> = Mutex::new(None);
        &SHARED
    }
}

/// How the registry finds the CUDA runtime: the probe only opens the
/// library, the table is resolved on first `runtime_for`.
pub(crate) fn registration() -> RuntimeRegistration {
    RuntimeRegistration {
        name: "cuda",
        device_types: device::DEVICE_TYPES,
        probe: CudaRuntime::probe,
        load: || Ok(CudaRuntime::load()? as Arc<dyn DeviceRuntime>),
    }
}
