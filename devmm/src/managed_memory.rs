//! What a managed resource answers: the [`ManagedMemory`] operations a
//! driver migrates pages with, and the [`Advice`] it takes. Below the
//! resource contract that names them; [`managed`](crate::prefetch) applies
//! them to buffers.

use std::fmt;
use std::str::FromStr;

use crate::device::Device;
use crate::error::{Error, Result};
use crate::ptr::DevicePtr;
use crate::stream::Stream;

/// What [`advise`](crate::advise) tells the driver about a managed range
/// (`cudaMemoryAdvise` / `hipMemoryAdvise`, which number them alike).
///
/// ```
/// use devmm::Advice;
/// assert_eq!(Advice::SetPreferredLocation.code(), 3);
/// assert_eq!(Advice::try_from(5)?, Advice::SetAccessedBy);
/// assert!(Advice::try_from(7).is_err());
/// assert_eq!(Advice::UnsetReadMostly.to_string(), "unset_read_mostly");
/// # Ok::<(), devmm::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Advice {
    /// The range is mostly read: each reading processor may keep a copy.
    SetReadMostly,
    /// Undoes [`SetReadMostly`](Self::SetReadMostly).
    UnsetReadMostly,
    /// Keep the range's pages on the given location when it can.
    SetPreferredLocation,
    /// Undoes [`SetPreferredLocation`](Self::SetPreferredLocation).
    UnsetPreferredLocation,
    /// The given device accesses the range: keep it mapped there.
    SetAccessedBy,
    /// Undoes [`SetAccessedBy`](Self::SetAccessedBy) for the given device.
    UnsetAccessedBy,
}

impl Advice {
    /// Every advice, in the drivers' numbering.
    pub const ALL: [Advice; 6] = [
        Advice::SetReadMostly,
        Advice::UnsetReadMostly,
        Advice::SetPreferredLocation,
        Advice::UnsetPreferredLocation,
        Advice::SetAccessedBy,
        Advice::UnsetAccessedBy,
    ];

    /// The driver's number for it (`cudaMemAdviseSetReadMostly` is 1).
    pub fn code(self) -> i32 {
        match self {
            Advice::SetReadMostly => 1,
            Advice::UnsetReadMostly => 2,
            Advice::SetPreferredLocation => 3,
            Advice::UnsetPreferredLocation => 4,
            Advice::SetAccessedBy => 5,
            Advice::UnsetAccessedBy => 6,
        }
    }

    /// Its name, as [`FromStr`] and Python's `devmm.advise` take it.
    pub fn name(self) -> &'static str {
        match self {
            Advice::SetReadMostly => "set_read_mostly",
            Advice::UnsetReadMostly => "unset_read_mostly",
            Advice::SetPreferredLocation => "set_preferred_location",
            Advice::UnsetPreferredLocation => "unset_preferred_location",
            Advice::SetAccessedBy => "set_accessed_by",
            Advice::UnsetAccessedBy => "unset_accessed_by",
        }
    }

    fn unknown(what: impl fmt::Display) -> Error {
        let names: Vec<&str> = Advice::ALL.iter().map(|a| a.name()).collect();
        Error::InvalidArgument {
            reason: format!(
                "unknown memory advice {what}; use one of {} (or their codes 1 to 6)",
                names.join(", ")
            ),
        }
    }
}

impl fmt::Display for Advice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Advice {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Advice::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| Advice::unknown(format_args!("{s:?}")))
    }
}

impl TryFrom<i32> for Advice {
    type Error = Error;

    fn try_from(code: i32) -> Result<Self> {
        Advice::ALL
            .into_iter()
            .find(|a| a.code() == code)
            .ok_or_else(|| Advice::unknown(code))
    }
}

/// Memory whose pages the driver migrates between the host and devices:
/// what [`MemoryResource::managed_memory`](crate::MemoryResource::managed_memory) returns for managed resources
/// (`CudaManagedMemoryResource`, `HipManagedMemoryResource`).
pub trait ManagedMemory: Send + Sync {
    /// Queues a migration of `[ptr, ptr + nbytes)` to `target` (a device of
    /// the memory's runtime, or [`Device::CPU`]) on `stream`.
    fn prefetch(
        &self,
        ptr: DevicePtr,
        nbytes: usize,
        target: Device,
        stream: &Stream,
    ) -> Result<()>;

    /// Gives `advice` for `[ptr, ptr + nbytes)` about `target` (a device of
    /// the memory's runtime, or [`Device::CPU`]; ignored by the read-mostly
    /// advice).
    fn advise(&self, ptr: DevicePtr, nbytes: usize, advice: Advice, target: Device) -> Result<()>;

    /// Whether the host may touch the memory only while its whole device
    /// is idle: on a device without concurrent managed access
    /// (`cudaDevAttrConcurrentManagedAccess` 0: older GPUs, Jetson boards,
    /// Windows) the GPU has all managed memory to itself while any kernel
    /// runs, and a host access faults. Host views then wait for the device,
    /// not only the buffer's stream. `false` by default.
    fn host_access_waits_for_device(&self) -> bool {
        false
    }
}
