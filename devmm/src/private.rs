//! What `devmm-macros` expands to. Not public API: the generated code names
//! everything through `::devmm::__private`, so these may change with the
//! macro crate, whose version `devmm` pins exactly.

pub use crate::dtype::{DType, Element};
pub use crate::error::{Error, MisuseKind, Result};
pub use crate::layout::{LayoutRuleError, StaticLayout, StaticPlan};
pub use crate::ledger::Ledger;
pub use crate::ptr::DevicePtr;
pub use crate::resource::{MemoryInfo, MemoryResource};
pub use crate::stream::Stream;
pub use crate::{Device, DeviceType};

/// The upstream field of a struct marked `#[memory_resource]` (found by its
/// `#[upstream]` attribute); the impl-block attribute forwards through it.
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no `#[upstream]` field for `#[memory_resource]` to forward to",
    label = "an adaptor needs its upstream",
    note = "put `#[devmm::memory_resource]` on the struct and mark the field it wraps `#[upstream]`, \
            or give a resource of your own `#[memory_resource(device = \"cpu\", alignment = 64, ..)]`"
)]
pub trait Adaptor {
    /// The wrapped resource's type.
    type Upstream: MemoryResource;

    /// The wrapped resource.
    fn upstream(&self) -> &Self::Upstream;
}

/// Prefixes the resource chain of an allocation failure that passed
/// through `mr` with the adaptor's name, unless `mr` built the error itself
/// (its chain already starts at `mr`).
pub fn through<R: MemoryResource>(mr: &R, error: Error, adaptor: &str) -> Error {
    match &error {
        Error::OutOfMemory { chain, .. } | Error::LimitExceeded { chain, .. }
            if *chain == crate::resource::resource_chain(mr) =>
        {
            error
        }
        _ => error.through(adaptor),
    }
}

/// Free and total memory of `device`, from its runtime: the default
/// `available_memory` of a generated resource.
pub fn device_memory_info(device: Device) -> Result<MemoryInfo> {
    crate::runtime::runtime_for(device)?.memory_info(device)
}

fn misuse<R: MemoryResource + ?Sized>(
    mr: &R,
    kind: MisuseKind,
    ptr: DevicePtr,
    nbytes: usize,
) -> Error {
    Error::Misuse {
        kind,
        ptr,
        nbytes,
        device: mr.device(),
        resource: format!("{mr:?}"),
        test_double: false,
    }
}

/// Finishes a generated `allocate`: a pointer that breaks the promised
/// alignment is given back and reported, and a tracked one is recorded.
pub fn allocated<R: MemoryResource + ?Sized>(
    mr: &R,
    ledger: Option<&Ledger>,
    nbytes: usize,
    result: Result<DevicePtr>,
    give_back: impl FnOnce(DevicePtr) -> Result<()>,
) -> Result<DevicePtr> {
    let ptr = result?;
    let promised = mr.guaranteed_alignment();
    if !ptr.is_aligned(promised) {
        // The caller never sees the pointer, so give it back rather than
        // leak it; the misalignment is the error worth reporting.
        let _ = give_back(ptr);
        return Err(misuse(mr, MisuseKind::Misaligned { promised }, ptr, nbytes));
    }
    if let Some(ledger) = ledger.filter(|_| !ptr.is_null()) {
        ledger.record(ptr, nbytes);
    }
    Ok(ptr)
}

/// A generated `deallocate`: a tracked pointer is checked against the
/// ledger before `free` runs, and restored to it if `free` fails.
pub fn deallocate<R: MemoryResource + ?Sized>(
    mr: &R,
    ledger: Option<&Ledger>,
    ptr: DevicePtr,
    nbytes: usize,
    free: impl FnOnce() -> Result<()>,
) -> Result<()> {
    // A zero-byte allocation may be null and is never recorded.
    let ledger = ledger.filter(|_| !(ptr.is_null() && nbytes == 0));
    if let Some(ledger) = ledger {
        ledger
            .take(ptr, nbytes)
            .map_err(|kind| misuse(mr, kind, ptr, nbytes))?;
    }
    free().inspect_err(|_| {
        if let Some(ledger) = ledger {
            ledger.record(ptr, nbytes);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MallocMemoryResource;

    #[test]
    fn a_misaligned_pointer_is_given_back_and_reported() {
        let mr = MallocMemoryResource::new();
        let mut given_back = None;
        let result = allocated(&mr, None, 8, Ok(DevicePtr::from_addr(0x1004)), |p| {
            given_back = Some(p);
            Ok(())
        });
        assert!(matches!(
            result,
            Err(Error::Misuse {
                kind: MisuseKind::Misaligned { promised: 64 },
                ..
            })
        ));
        assert_eq!(given_back, Some(DevicePtr::from_addr(0x1004)));
    }

    #[test]
    fn a_failed_free_keeps_the_pointer_live() {
        let mr = MallocMemoryResource::new();
        let ledger = Ledger::new();
        let p = DevicePtr::from_addr(0x1000);
        allocated(&mr, Some(&ledger), 8, Ok(p), |_| Ok(())).unwrap();
        let failure = Error::InvalidArgument {
            reason: "no".into(),
        };
        assert_eq!(
            deallocate(&mr, Some(&ledger), p, 8, || Err(failure.clone())),
            Err(failure)
        );
        assert_eq!(ledger.live_count(), 1);
        assert_eq!(deallocate(&mr, Some(&ledger), p, 8, || Ok(())), Ok(()));
        assert!(matches!(
            deallocate(&mr, Some(&ledger), p, 8, || Ok(())),
            Err(Error::Misuse {
                kind: MisuseKind::DoubleFree,
                ..
            })
        ));
    }

    #[test]
    fn null_zero_byte_allocations_are_not_tracked() {
        let mr = MallocMemoryResource::new();
        let ledger = Ledger::new();
        allocated(&mr, Some(&ledger), 0, Ok(DevicePtr::NULL), |_| Ok(())).unwrap();
        assert_eq!(ledger.live_count(), 0);
        assert_eq!(
            deallocate(&mr, Some(&ledger), DevicePtr::NULL, 0, || Ok(())),
            Ok(())
        );
    }
}
