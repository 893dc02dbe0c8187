//! What a runtime can say about a device and its libraries beyond memory:
//! what an `nvidia-smi` user expects from `devmm info`.

/// A device as its runtime describes it; every field is `None` where the
/// runtime cannot tell (the CPU, pinned memory, an older library).
///
/// ```
/// let cpu = devmm::runtime_for("cpu")?.describe(devmm::Device::CPU)?;
/// assert_eq!(cpu, devmm::runtime::DeviceDescription::default());
/// # Ok::<(), devmm::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceDescription {
    /// The product name (`NVIDIA H200`).
    pub name: Option<String>,
    /// The compute capability (major, minor), on CUDA.
    pub compute_capability: Option<(i32, i32)>,
    /// The PCI bus id (`0000:1b:00.0`).
    pub pci_bus_id: Option<String>,
    /// Whether the device supports memory pools (stream-ordered allocation).
    pub memory_pools: Option<bool>,
}

/// The runtime library's version and the driver's, in the platform's own
/// notation (CUDA `13.0`, HIP `6.2.41133`) and as the library encodes them.
/// The driver's appears only where a kernel driver answered: CUDA's
/// `cudaDriverGetVersion` (0, none, when no driver is installed); on ROCm,
/// the amdgpu kernel module's version, since HIP's `hipDriverGetVersion` is
/// HIP's own on AMD.
///
/// ```
/// let v = devmm::runtime::LibraryVersions::new("13.0".into(), 13000, Some("13.0".into()), Some(13000));
/// assert_eq!(v.runtime, "13.0");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LibraryVersions {
    /// The runtime library's version.
    pub runtime: String,
    /// Its encoded form (`cudaRuntimeGetVersion`).
    pub runtime_code: i32,
    /// The kernel driver's version (the newest runtime it supports, on
    /// CUDA), where one answered.
    pub driver: Option<String>,
    /// Its encoded form (`cudaDriverGetVersion`), where it has one.
    pub driver_code: Option<i32>,
}

impl LibraryVersions {
    /// Versions from their text and encoded forms.
    pub fn new(
        runtime: String,
        runtime_code: i32,
        driver: Option<String>,
        driver_code: Option<i32>,
    ) -> Self {
        LibraryVersions {
            runtime,
            runtime_code,
            driver,
            driver_code,
        }
    }
}
