//! The current-resource registry: which resource `empty` and
//! `DeviceBuffer::new` use on each device when none is named.
//!
//! A process-wide map of strong references keyed by device, overridden per
//! thread by [`using_memory_resource`] guards, with a lazy default asked of
//! the device's runtime.

use std::cell::RefCell;
use std::marker::PhantomData;
use std::sync::{Arc, RwLock};

use crate::device::Device;
use crate::error::Result;
use crate::resource::MemoryResource;

type SharedResource = Arc<dyn MemoryResource>;

/// The process-wide table. A process has a handful of devices, so a list
/// scanned in order is cheaper than hashing, and `empty()` looks here on
/// every call.
static GLOBAL: RwLock<Vec<(Device, SharedResource)>> = RwLock::new(Vec::new());

fn lookup(table: &[(Device, SharedResource)], device: Device) -> Option<&SharedResource> {
    table.iter().find(|(d, _)| *d == device).map(|(_, mr)| mr)
}

thread_local! {
    /// This thread's overrides, innermost last, each tagged with its guard's id.
    static OVERRIDES: RefCell<Vec<(u64, SharedResource)>> = const { RefCell::new(Vec::new()) };
    static NEXT_GUARD: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The resource in force on `device` for this thread: the innermost
/// [`using_memory_resource`] override, else the process-wide one, else the
/// runtime's default (installed process-wide on first use).
///
/// ```
/// use devmm::{get_current_memory_resource, Device};
/// let mr = get_current_memory_resource(Device::CPU)?;
/// assert_eq!(format!("{mr:?}"), "MallocMemoryResource(device=cpu:0, alignment=64)");
/// # Ok::<(), devmm::Error>(())
/// ```
pub fn get_current_memory_resource(device: Device) -> Result<SharedResource> {
    let overridden = OVERRIDES.with_borrow(|stack| {
        stack
            .iter()
            .rev()
            .find(|(_, mr)| mr.device() == device)
            .map(|(_, mr)| Arc::clone(mr))
    });
    if let Some(mr) = overridden {
        return Ok(mr);
    }
    if let Some(mr) = lookup(&GLOBAL.read().unwrap_or_else(|e| e.into_inner()), device) {
        return Ok(Arc::clone(mr));
    }
    let default = crate::runtime::runtime_for(device)?.default_resource(device)?;
    let mut table = GLOBAL.write().unwrap_or_else(|e| e.into_inner());
    // Another thread may have installed one meanwhile: keep the first.
    if let Some(mr) = lookup(&table, device) {
        return Ok(Arc::clone(mr));
    }
    table.push((device, Arc::clone(&default)));
    Ok(default)
}

/// Makes `mr` the process-wide current resource of `mr.device()`, returning
/// the one it replaces.
///
/// ```
/// use std::sync::Arc;
/// use devmm::{set_current_memory_resource, get_current_memory_resource, Device, MallocMemoryResource};
/// let mine: Arc<dyn devmm::MemoryResource> = Arc::new(MallocMemoryResource::with_alignment(128)?);
/// let previous = set_current_memory_resource(Arc::clone(&mine));
/// assert!(Arc::ptr_eq(&get_current_memory_resource(Device::CPU)?, &mine));
/// if let Some(previous) = previous { set_current_memory_resource(previous); }
/// # Ok::<(), devmm::Error>(())
/// ```
pub fn set_current_memory_resource(mr: SharedResource) -> Option<SharedResource> {
    let device = mr.device();
    let mut table = GLOBAL.write().unwrap_or_else(|e| e.into_inner());
    match table.iter_mut().find(|(d, _)| *d == device) {
        Some((_, current)) => Some(std::mem::replace(current, mr)),
        None => {
            table.push((device, mr));
            None
        }
    }
}

/// Makes `mr` current for its device on this thread until the guard drops.
/// Guards nest; dropping one restores what was current before it, even when
/// guards are dropped out of order.
///
/// ```
/// use std::sync::Arc;
/// use devmm::{get_current_memory_resource, using_memory_resource, Device, MallocMemoryResource, StatisticsAdaptor};
/// let stats: Arc<dyn devmm::MemoryResource> = Arc::new(StatisticsAdaptor::new(MallocMemoryResource::new()));
/// {
///     let _guard = using_memory_resource(Arc::clone(&stats));
///     assert!(Arc::ptr_eq(&get_current_memory_resource(Device::CPU)?, &stats));
/// }
/// assert!(!Arc::ptr_eq(&get_current_memory_resource(Device::CPU)?, &stats));
/// # Ok::<(), devmm::Error>(())
/// ```
pub fn using_memory_resource(mr: SharedResource) -> ResourceGuard {
    let id = NEXT_GUARD.with(|next| {
        let id = next.get();
        next.set(id + 1);
        id
    });
    OVERRIDES.with_borrow_mut(|stack| stack.push((id, Arc::clone(&mr))));
    ResourceGuard {
        id,
        mr,
        _not_send: PhantomData,
    }
}

/// Keeps a [`using_memory_resource`] override in force; restores on drop.
///
/// Not `Send`: the override belongs to the thread that made it.
#[derive(Debug)]
#[must_use = "the override ends when the guard drops"]
pub struct ResourceGuard {
    id: u64,
    mr: SharedResource,
    _not_send: PhantomData<*const ()>,
}

impl ResourceGuard {
    /// The resource this guard made current.
    pub fn resource(&self) -> &SharedResource {
        &self.mr
    }
}

impl Drop for ResourceGuard {
    fn drop(&mut self) {
        // `try_with`: during thread teardown the stack may be gone already,
        // and then there is nothing left to restore.
        let _ = OVERRIDES.try_with(|stack| {
            if let Ok(mut stack) = stack.try_borrow_mut() {
                stack.retain(|(id, _)| *id != self.id);
            }
        });
    }
}
