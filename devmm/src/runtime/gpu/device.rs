//! Device checks and activation: the driver's current device is per thread,
//! so every call made for a device runs under a guard that selects it and
//! restores the previous one.

use std::ffi::c_int;
use std::sync::Arc;

use crate::device::Device;
use crate::error::{Error, Result};
use crate::runtime::ActivationGuard;
use crate::runtime::driver::Driver;

use super::{Platform, result};

/// The driver's ordinal for `device` (DLPack's device id).
pub(crate) fn ordinal(device: Device) -> c_int {
    // `Device` indices are at most `i32::MAX` (DLPack carries them as int32).
    c_int::try_from(device.index()).unwrap_or(c_int::MAX)
}

/// Checks that `P`'s runtime serves `device` and that the device exists
/// (one of the `count` devices the runtime found at load).
pub(crate) fn check<P: Platform>(count: usize, device: Device) -> Result<()> {
    if !P::DEVICE_TYPES.contains(&device.ty()) {
        return Err(Error::InvalidArgument {
            reason: format!(
                "the {} runtime does not serve {device}; use a {} device or runtime_for({device})",
                P::RUNTIME,
                P::DEVICE
            ),
        });
    }
    if usize::try_from(device.index()).is_ok_and(|i| i < count) {
        Ok(())
    } else {
        Err(Error::InvalidArgument {
            reason: format!(
                "{device} does not exist: the {} reports {count} device(s); use an index below {count}",
                P::API
            ),
        })
    }
}

/// Makes `device` current on this thread until the guard drops; a no-op
/// guard when it already is. The guard restores the previous device only
/// when doing so creates no context. Every driver call for a device starts
/// here, so a process forked after the runtime started is refused before
/// it reaches the driver.
pub(crate) fn activate<P: Platform>(
    driver: &Arc<Driver<P>>,
    device: Device,
) -> Result<ActivationGuard> {
    driver.owner().check(P::RUNTIME, device)?;
    let previous = result::device::get(driver)?;
    let wanted = ordinal(device);
    if previous == wanted {
        return Ok(ActivationGuard::noop());
    }
    result::device::set(driver, wanted, Some(device))?;
    let driver = Arc::clone(driver);
    Ok(ActivationGuard::new(move || {
        // As PyTorch does: a previous device without a context (a fresh
        // thread reports device 0 before anything ran there) is not made
        // current again, since that would create a context on it, hundreds
        // of MiB on a GPU nobody asked for. The thread stays on `wanted`.
        if driver.table().has_primary_context(previous) == Some(false) {
            return;
        }
        if let Err(e) = result::device::set(&driver, previous, None) {
            tracing::warn!(target: "devmm::runtime", error = %e, "could not restore the previously active device");
        }
    }))
}
