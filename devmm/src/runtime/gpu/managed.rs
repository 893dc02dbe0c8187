//! Prefetch and advice for the managed resources (`cudaMemPrefetchAsync`,
//! `cudaMemAdvise`, HIP's): [`ManagedMemory`] for `GpuMemory<P, ManagedKind>`.
//!
//! The description files give these calls their CUDA 8-12 (and HIP)
//! signatures, a device ordinal with -1 for the host. CUDA 13 kept the
//! names and changed the signatures to take a `cudaMemLocation` by value
//! (and prefetch a `flags` word): on a runtime whose version is at least
//! [`Platform::MEM_LOCATION_SINCE`] the same entry points are called in
//! that shape (ADR 0007).

use std::ffi::{c_int, c_uint, c_void};

use crate::device::{Device, DeviceType};
use crate::error::{Error, Result};
use crate::managed_memory::{Advice, ManagedMemory};
use crate::ptr::DevicePtr;
use crate::stream::Stream;

use super::memory::{GpuMemory, ManagedKind};
use super::{Handle, Platform, Status, device, result};
use crate::resource::MemoryResource;

/// `cudaCpuDeviceId` / `hipCpuDeviceId`: the host as a target.
const CPU_ORDINAL: c_int = -1;

/// `struct cudaMemLocation { enum cudaMemLocationType type; int id; }`,
/// passed by value to CUDA 13's prefetch and advice.
#[repr(C)]
#[derive(Clone, Copy)]
struct MemLocation {
    kind: c_int,
    id: c_int,
}

/// `cudaMemLocationTypeDevice` and `cudaMemLocationTypeHost`.
const LOCATION_DEVICE: c_int = 1;
const LOCATION_HOST: c_int = 2;

/// What this module assumes of the headers, for `real_headers`.
#[cfg(all(test, not(miri)))]
pub(super) fn header_facts() -> Vec<(&'static str, i128)> {
    vec![("{P}CpuDeviceId", CPU_ORDINAL.into())]
}

/// CUDA 13's location struct and its values, for `real_headers`.
#[cfg(all(test, not(miri)))]
pub(super) fn location_facts() -> Vec<(&'static str, i128)> {
    use std::mem::{offset_of, size_of};
    vec![
        ("cudaMemLocationTypeDevice", LOCATION_DEVICE.into()),
        ("cudaMemLocationTypeHost", LOCATION_HOST.into()),
        ("sizeof(cudaMemLocation)", size_of::<MemLocation>() as i128),
        (
            "offsetof(cudaMemLocation, type)",
            offset_of!(MemLocation, kind) as i128,
        ),
        (
            "offsetof(cudaMemLocation, id)",
            offset_of!(MemLocation, id) as i128,
        ),
    ]
}

impl MemLocation {
    fn of(ordinal: c_int) -> MemLocation {
        if ordinal == CPU_ORDINAL {
            MemLocation {
                kind: LOCATION_HOST,
                id: 0,
            }
        } else {
            MemLocation {
                kind: LOCATION_DEVICE,
                id: ordinal,
            }
        }
    }
}

/// CUDA 13's `cudaMemPrefetchAsync`.
type PrefetchLocation =
    unsafe extern "C" fn(*const c_void, usize, MemLocation, c_uint, Handle) -> Status;
/// CUDA 13's `cudaMemAdvise`.
type AdviseLocation = unsafe extern "C" fn(*const c_void, usize, c_int, MemLocation) -> Status;

impl<P: Platform> GpuMemory<P, ManagedKind> {
    /// The driver's ordinal for a target: -1 for the host, the index of a
    /// device of this runtime.
    fn target_ordinal(&self, target: Device, operation: &str) -> Result<c_int> {
        if target.ty() == DeviceType::Cpu {
            return Ok(CPU_ORDINAL);
        }
        if target.ty() == P::DEVICE || target.ty() == P::MANAGED {
            return Ok(device::ordinal(target));
        }
        Err(Error::InvalidArgument {
            reason: format!(
                "{operation} {self:?} to {target}: the target is a {} device or cpu (the host); \
                 pass one",
                P::DEVICE
            ),
        })
    }

    /// Whether the loaded runtime takes a location struct (CUDA 13).
    fn takes_location(&self) -> Result<bool> {
        Ok(match P::MEM_LOCATION_SINCE {
            Some(since) => result::version::get(self.driver())?.0 >= since,
            None => false,
        })
    }

    fn missing(&self, call: &str) -> Error {
        Error::InvalidArgument {
            reason: format!(
                "{call} is not in the loaded {} library ({self:?}); managed memory hints need a \
                 newer runtime",
                P::API
            ),
        }
    }
}

impl<P: Platform> ManagedMemory for GpuMemory<P, ManagedKind> {
    fn host_access_waits_for_device(&self) -> bool {
        self.host_waits_for_device()
    }

    fn prefetch(
        &self,
        ptr: DevicePtr,
        nbytes: usize,
        target: Device,
        stream: &Stream,
    ) -> Result<()> {
        let ordinal = self.target_ordinal(target, "prefetching")?;
        let call = self
            .driver()
            .roles()
            .mem_prefetch_async
            .ok_or_else(|| self.missing("the prefetch call"))?;
        if !P::DEVICE_TYPES.contains(&stream.device().ty()) {
            return Err(Error::Refused {
                reason: format!(
                    "prefetching {self:?} to {target} on a stream of {}; pass a {} stream",
                    stream.device(),
                    P::RUNTIME
                ),
            });
        }
        stream.check_usable_here("a prefetch")?;
        let location = self.takes_location()?;
        let _active = device::activate(self.driver(), stream.device())?;
        let at = ptr.as_host_ptr::<c_void>().cast_const();
        let handle = stream.handle() as Handle;
        let status = if location {
            // SAFETY: a runtime at or past `MEM_LOCATION_SINCE` (CUDA 13)
            // exports this symbol with `PrefetchLocation`'s signature; the
            // table's type is the older one, so the pointer is reread as
            // the function it is.
            let f: PrefetchLocation = unsafe { std::mem::transmute(call.f) };
            // SAFETY: `[at, at + nbytes)` is the caller's managed range, the
            // stream belongs to the active device; flags must be 0.
            unsafe { f(at, nbytes, MemLocation::of(ordinal), 0, handle) }
        } else {
            // SAFETY: as above, with the ordinal form of the call.
            unsafe { (call.f)(at, nbytes, ordinal, handle) }
        };
        result::check(self.driver(), call.name, status, Some(target))
    }

    fn advise(&self, ptr: DevicePtr, nbytes: usize, advice: Advice, target: Device) -> Result<()> {
        let ordinal = self.target_ordinal(target, "advising")?;
        let call = self
            .driver()
            .roles()
            .mem_advise
            .ok_or_else(|| self.missing("the advice call"))?;
        let location = self.takes_location()?;
        let _active = device::activate(self.driver(), self.device())?;
        let at = ptr.as_host_ptr::<c_void>().cast_const();
        let status = if location {
            // SAFETY: as in `prefetch`: CUDA 13's `cudaMemAdvise` has
            // `AdviseLocation`'s signature.
            let f: AdviseLocation = unsafe { std::mem::transmute(call.f) };
            // SAFETY: `[at, at + nbytes)` is the caller's managed range.
            unsafe { f(at, nbytes, advice.code(), MemLocation::of(ordinal)) }
        } else {
            // SAFETY: as above, with the ordinal form of the call.
            unsafe { (call.f)(at, nbytes, advice.code(), ordinal) }
        };
        result::check(self.driver(), call.name, status, Some(target))
    }
}
