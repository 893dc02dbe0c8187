//! The runtimes' raw copy ([`StreamRuntime::memcpy`](crate::StreamRuntime::memcpy)):
//! its direction ([`CopyKind`]) and the checks every runtime makes of its
//! addresses. Below `stream`, whose operations table names them, and so
//! below `copy`, whose copies go through streams.

use crate::error::{Error, Result};
use crate::ptr::DevicePtr;

/// The direction of a raw copy between two addresses. The discriminants are
/// the `cudaMemcpyKind` / `hipMemcpyKind` codes (the two APIs share them),
/// so the GPU runtimes hand a kind to the driver as it is.
///
/// ```
/// use devmm::CopyKind;
/// assert_eq!(CopyKind::try_from(2)?, CopyKind::DeviceToHost);
/// assert_eq!(CopyKind::Default as i32, 4);
/// assert_eq!(CopyKind::HostToDevice.name(), "HOST_TO_DEVICE");
/// assert!(CopyKind::try_from(5).is_err());
/// # Ok::<(), devmm::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum CopyKind {
    /// Both addresses are host memory.
    HostToHost = 0,
    /// From host memory to device memory.
    HostToDevice = 1,
    /// From device memory to host memory.
    DeviceToHost = 2,
    /// Between two device addresses.
    DeviceToDevice = 3,
    /// The driver tells each address's memory itself; only where the device
    /// has unified addressing (every 64-bit CUDA and ROCm system).
    Default = 4,
}

impl CopyKind {
    /// Every kind, in code order.
    pub const ALL: [CopyKind; 5] = [
        CopyKind::HostToHost,
        CopyKind::HostToDevice,
        CopyKind::DeviceToHost,
        CopyKind::DeviceToDevice,
        CopyKind::Default,
    ];

    /// The name Python's `devmm.CopyKind` gives the kind (`HOST_TO_HOST`).
    pub const fn name(self) -> &'static str {
        match self {
            CopyKind::HostToHost => "HOST_TO_HOST",
            CopyKind::HostToDevice => "HOST_TO_DEVICE",
            CopyKind::DeviceToHost => "DEVICE_TO_HOST",
            CopyKind::DeviceToDevice => "DEVICE_TO_DEVICE",
            CopyKind::Default => "DEFAULT",
        }
    }
}

impl TryFrom<i64> for CopyKind {
    type Error = Error;

    /// The kind of its `cudaMemcpyKind` code; any other value is an
    /// [`Error::InvalidArgument`].
    fn try_from(code: i64) -> Result<CopyKind> {
        CopyKind::ALL
            .into_iter()
            .find(|&kind| kind as i64 == code)
            .ok_or_else(|| Error::InvalidArgument {
                reason: format!(
                    "kind must be a copy kind, 0 (HOST_TO_HOST) to 4 (DEFAULT), not {code}"
                ),
            })
    }
}

/// Checks the addresses of a raw copy of `nbytes`: neither may be null,
/// and neither range may run past the end of the address space. A copy of
/// zero bytes touches nothing and passes.
pub(crate) fn check_addresses(dst: DevicePtr, src: DevicePtr, nbytes: usize) -> Result<()> {
    if nbytes == 0 {
        return Ok(());
    }
    if isize::try_from(nbytes).is_err() {
        return Err(Error::InvalidArgument {
            reason: format!(
                "cannot copy {nbytes} bytes: no allocation is larger than {} bytes",
                isize::MAX
            ),
        });
    }
    for (side, ptr) in [("dst", dst), ("src", src)] {
        if ptr.is_null() {
            return Err(Error::InvalidArgument {
                reason: format!("cannot copy {nbytes} bytes with {side} null; pass a live address"),
            });
        }
        if ptr.offset(nbytes).is_none() {
            return Err(Error::InvalidArgument {
                reason: format!(
                    "cannot copy {nbytes} bytes at {side} {:#x}: the range runs past the end of the address space",
                    ptr.addr()
                ),
            });
        }
    }
    Ok(())
}

/// Copies host memory to host memory; the ranges may overlap (memmove).
///
/// # Safety
///
/// `src` is valid for `nbytes` bytes of reads and `dst` for as many writes.
pub(crate) unsafe fn host_to_host(dst: DevicePtr, src: DevicePtr, nbytes: usize) {
    // SAFETY: the caller vouches for both ranges; `copy` tolerates overlap.
    unsafe { std::ptr::copy(src.as_host_ptr::<u8>(), dst.as_host_ptr::<u8>(), nbytes) };
}
