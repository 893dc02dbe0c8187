//! Runtimes: one per platform, each the single place that talks to its driver.
//!
//! A [`DeviceRuntime`] enumerates devices, reports memory, activates
//! devices and picks the default resource; what its streams need of it
//! (making streams, copying bytes on them) is its supertrait
//! [`StreamRuntime`], the operations table a stream holds. Runtimes
//! are discovered by name: [`runtime_names`] only probes, [`runtime_for`]
//! loads once and hands out the same instance afterwards.

pub mod cpu;
pub mod cuda;
mod description;
mod discovery;
mod driver;
mod fork;
mod gpu;
mod registry;
pub mod rocm;

use std::fmt;
use std::sync::Arc;

use crate::device::{Device, DeviceType};
use crate::error::Result;
use crate::resource::{MemoryInfo, MemoryResource};

pub use crate::stream::StreamRuntime;

pub use description::{DeviceDescription, LibraryVersions};
pub use gpu::memory::GPU_ALIGNMENT;
pub use gpu::pool::PoolOptions;
pub use registry::{
    RUNTIME_ENV, RuntimeRegistration, RuntimeSelector, available_runtimes, check_runtime_override,
    check_runtime_plugin, default_device, register_external_runtime, register_runtime, runtime_for,
    runtime_names, set_external_runtimes, stream_for,
};

/// Everything devmm needs from one platform: its devices, memory and
/// resources here, and through its supertrait [`StreamRuntime`] what its
/// streams need (naming it, making streams, copying bytes on them), so a
/// runtime is implemented as both traits.
///
/// ```
/// use devmm::{runtime_for, Device};
/// let cpu = runtime_for(Device::CPU)?;
/// assert_eq!(cpu.name(), "cpu");
/// assert_eq!(cpu.devices()?, vec![Device::CPU]);
/// assert_eq!(cpu.default_stream(Device::CPU)?.handle(), 0);
/// # Ok::<(), devmm::Error>(())
/// ```
pub trait DeviceRuntime: StreamRuntime {
    /// How many devices of the primary type exist.
    fn device_count(&self) -> Result<usize>;

    /// How many devices of type `ty` the runtime serves: the primary type's
    /// [`device_count`](Self::device_count); for the other types it serves
    /// (pinned and managed memory, device 0 for DLPack) one when it has a
    /// device at all; none of a type it does not serve.
    ///
    /// ```
    /// use devmm::{runtime_for, DeviceType};
    /// let cpu = runtime_for("cpu")?;
    /// assert_eq!((cpu.device_count_of(DeviceType::Cpu)?, cpu.device_count_of(DeviceType::Cuda)?), (1, 0));
    /// # Ok::<(), devmm::Error>(())
    /// ```
    fn device_count_of(&self, ty: DeviceType) -> Result<usize> {
        let types = self.device_types();
        if types.first() == Some(&ty) {
            self.device_count()
        } else if types.contains(&ty) {
            Ok(self.device_count()?.min(1))
        } else {
            Ok(0)
        }
    }

    /// The devices of the primary type, `index` 0 upwards.
    fn devices(&self) -> Result<Vec<Device>> {
        let ty = self.device_types()[0];
        (0..self.device_count()?)
            .map(|i| Ok(Device::try_new(ty, u32::try_from(i).unwrap_or(u32::MAX))?))
            .collect()
    }

    /// Free and total memory of `device`.
    fn memory_info(&self, device: Device) -> Result<MemoryInfo>;

    /// Makes `device` the active one for this thread until the guard drops.
    fn activate(&self, device: Device) -> Result<ActivationGuard>;

    /// The resource to use for `device` when the registry has none.
    fn default_resource(&self, device: Device) -> Result<Arc<dyn MemoryResource>>;

    /// What the runtime can say about `device` beyond its memory (name,
    /// compute capability, PCI bus id, memory pools); nothing by default.
    fn describe(&self, device: Device) -> Result<DeviceDescription> {
        let _ = device;
        Ok(DeviceDescription::default())
    }

    /// The runtime library's and the driver's versions, for runtimes over
    /// a vendor library; `None` by default.
    fn library_versions(&self) -> Result<Option<LibraryVersions>> {
        Ok(None)
    }

    /// Every vendor library discovery tried before this runtime loaded,
    /// each as `path (outcome)` with the one used last, so a library that
    /// loads but cannot run (a CUDA 13 runtime over a CUDA 12 driver) and
    /// was passed over is reported; empty by default, and for a library
    /// named by path.
    ///
    /// ```
    /// let cpu = devmm::runtime_for("cpu")?;
    /// assert!(cpu.library_discovery().is_empty());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    fn library_discovery(&self) -> &[String] {
        &[]
    }

    /// The file (or name) the runtime's vendor library was loaded from,
    /// for runtimes over one; `None` by default.
    fn library_file(&self) -> Option<String> {
        None
    }
}

/// Restores the previously active device when dropped.
///
/// ```
/// let rt = devmm::runtime_for("cpu")?;
/// let _guard = rt.activate(devmm::Device::CPU)?;
/// # Ok::<(), devmm::Error>(())
/// ```
#[must_use = "the device is only active while the guard lives"]
pub struct ActivationGuard {
    restore: Option<Box<dyn FnOnce()>>,
    /// Not `Send`: the active device is per thread, so the guard must drop
    /// on the thread that made it.
    _not_send: std::marker::PhantomData<*const ()>,
}

impl ActivationGuard {
    /// A guard with nothing to restore (platforms without device state).
    pub fn noop() -> ActivationGuard {
        ActivationGuard {
            restore: None,
            _not_send: std::marker::PhantomData,
        }
    }

    /// A guard that runs `restore` on drop.
    pub fn new(restore: impl FnOnce() + 'static) -> ActivationGuard {
        ActivationGuard {
            restore: Some(Box::new(restore)),
            _not_send: std::marker::PhantomData,
        }
    }
}

impl Drop for ActivationGuard {
    fn drop(&mut self) {
        if let Some(restore) = self.restore.take() {
            restore();
        }
    }
}

impl fmt::Debug for ActivationGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActivationGuard")
            .field("restores", &self.restore.is_some())
            .finish()
    }
}

/// The runtimes devmm ships, in discovery order.
fn builtin_registrations() -> Vec<RuntimeRegistration> {
    vec![
        cpu::registration(),
        cuda::registration(),
        rocm::registration(),
    ]
}
