//! The current-resource registry: which resource `empty` and
//! `DeviceBuffer::on_device` use on each device when none is named.
//!
//! A process-wide map of strong references keyed by device, overridden by
//! [`using_memory_resource`] guards, with a lazy default asked of the
//! device's runtime. There is one registry, here; where overrides live is
//! pluggable ([`OverrideScope`]): per thread by default, or wherever a
//! binding keeps them ([`set_override_scope`]; the Python package keeps
//! them in a `contextvars.ContextVar`, so Rust code called inside a Python
//! `with devmm.using_memory_resource(mr):` block sees `mr`).

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

use crate::device::Device;
use crate::error::{Error, Result};
use crate::resource::MemoryResource;

type SharedResource = Arc<dyn MemoryResource>;

/// The process-wide table. A process has a handful of devices, so a list
/// scanned in order is cheaper than hashing, and `empty()` looks here on
/// every call.
static GLOBAL: RwLock<Vec<(Device, SharedResource)>> = RwLock::new(Vec::new());

fn lookup(table: &[(Device, SharedResource)], device: Device) -> Option<&SharedResource> {
    table.iter().find(|(d, _)| *d == device).map(|(_, mr)| mr)
}

/// Where [`using_memory_resource`] overrides live: the scope decides what
/// "the caller's context" is (a thread, a Python `contextvars` context).
///
/// [`current`](Self::current) runs on every `empty()` without a resource,
/// so an implementation answers the no-override case without locking or
/// calling out (the Python scope checks a flag before it asks Python).
///
/// ```
/// use std::any::Any;
/// use std::sync::{Arc, Mutex};
/// use devmm::{Device, MemoryResource, OverrideScope};
/// /// One process-wide stack: overrides seen by every thread.
/// #[derive(Default)]
/// struct Global(Arc<Mutex<Vec<Arc<dyn MemoryResource>>>>);
/// struct Pop(Arc<Mutex<Vec<Arc<dyn MemoryResource>>>>);
/// impl Drop for Pop {
///     fn drop(&mut self) { self.0.lock().unwrap().pop(); }
/// }
/// impl OverrideScope for Global {
///     fn current(&self, device: Device) -> Option<Arc<dyn MemoryResource>> {
///         self.0.lock().unwrap().iter().rev().find(|mr| mr.device() == device).cloned()
///     }
///     fn enter(&self, mr: Arc<dyn MemoryResource>) -> Box<dyn Any> {
///         self.0.lock().unwrap().push(mr);
///         Box::new(Pop(Arc::clone(&self.0)))
///     }
/// }
/// // Installed with `devmm::set_override_scope(Global::default())`, once per process.
/// ```
pub trait OverrideScope: Send + Sync {
    /// The innermost override for `device` in the caller's context.
    fn current(&self, device: Device) -> Option<SharedResource>;

    /// Makes `mr` current for its device in the caller's context until the
    /// returned value drops (then what was current before is restored).
    fn enter(&self, mr: SharedResource) -> Box<dyn Any>;

    /// What the registry installs as a device's lazily made default (the
    /// runtime's resource, `default`): a binding gives it its own object
    /// here, as an [`origin`](MemoryResource::origin), so every later
    /// lookup hands out that one object. Unchanged unless overridden.
    fn adopt_default(&self, default: SharedResource) -> SharedResource {
        default
    }
}

/// The default scope: overrides per thread.
struct ThreadScope;

thread_local! {
    /// This thread's overrides, innermost last, each tagged with its entry's id.
    static OVERRIDES: RefCell<Vec<(u64, SharedResource)>> = const { RefCell::new(Vec::new()) };
    static NEXT_ENTRY: Cell<u64> = const { Cell::new(0) };
}

/// Whether any thread-scope override was ever made: a scope installed
/// later would not see it, so installing is refused then.
static THREAD_SCOPE_USED: AtomicBool = AtomicBool::new(false);

/// One [`ThreadScope`] override; removes itself on drop, even out of order.
struct ThreadEntry(u64);

impl Drop for ThreadEntry {
    fn drop(&mut self) {
        // `try_with`: during thread teardown the stack may be gone already,
        // and then there is nothing left to restore.
        let _ = OVERRIDES.try_with(|stack| {
            if let Ok(mut stack) = stack.try_borrow_mut() {
                stack.retain(|(id, _)| *id != self.0);
            }
        });
    }
}

impl OverrideScope for ThreadScope {
    fn current(&self, device: Device) -> Option<SharedResource> {
        OVERRIDES.with_borrow(|stack| {
            stack
                .iter()
                .rev()
                .find(|(_, mr)| mr.device() == device)
                .map(|(_, mr)| Arc::clone(mr))
        })
    }

    fn enter(&self, mr: SharedResource) -> Box<dyn Any> {
        THREAD_SCOPE_USED.store(true, Ordering::Relaxed);
        let id = NEXT_ENTRY.with(|next| {
            let id = next.get();
            next.set(id + 1);
            id
        });
        OVERRIDES.with_borrow_mut(|stack| stack.push((id, mr)));
        Box::new(ThreadEntry(id))
    }
}

static SCOPE: OnceLock<Box<dyn OverrideScope>> = OnceLock::new();

fn scope() -> &'static dyn OverrideScope {
    match SCOPE.get() {
        Some(scope) => &**scope,
        None => &ThreadScope,
    }
}

/// The innermost override for `device`; the default scope is called
/// directly, not through the vtable, since `empty()` asks on every call.
fn overridden(device: Device) -> Option<SharedResource> {
    match SCOPE.get() {
        Some(scope) => scope.current(device),
        None => ThreadScope.current(device),
    }
}

/// Makes `scope` the home of every override in the process, from now on:
/// [`using_memory_resource`] enters it and [`get_current_memory_resource`]
/// asks it. Installed once, before any override is made; a second scope,
/// or one installed after thread-scope overrides were made (they would be
/// lost), is an [`Error::InvalidArgument`].
///
/// ```
/// # struct Mine;
/// # impl devmm::OverrideScope for Mine {
/// #     fn current(&self, _: devmm::Device) -> Option<std::sync::Arc<dyn devmm::MemoryResource>> { None }
/// #     fn enter(&self, _: std::sync::Arc<dyn devmm::MemoryResource>) -> Box<dyn std::any::Any> { Box::new(()) }
/// # }
/// let _guard = devmm::using_memory_resource(std::sync::Arc::new(devmm::MallocMemoryResource::new()));
/// let refused = devmm::set_override_scope(Mine).unwrap_err();
/// assert!(refused.to_string().contains("before any override"));
/// ```
pub fn set_override_scope(scope: impl OverrideScope + 'static) -> Result<()> {
    if THREAD_SCOPE_USED.load(Ordering::Relaxed) {
        return Err(Error::InvalidArgument {
            reason: "set_override_scope must be called before any override is made \
                     (thread-scope overrides exist); install the scope at startup"
                .into(),
        });
    }
    SCOPE
        .set(Box::new(scope))
        .map_err(|_| Error::InvalidArgument {
            reason: "an override scope is already installed; a process has one".into(),
        })
}

/// The resource in force on `device` in the caller's context: the
/// innermost [`using_memory_resource`] override, else the process-wide
/// one, else the runtime's default (installed process-wide on first use).
///
/// ```
/// use devmm::{get_current_memory_resource, Device};
/// let mr = get_current_memory_resource(Device::CPU)?;
/// assert_eq!(format!("{mr:?}"), "MallocMemoryResource(device=cpu:0, alignment=64)");
/// # Ok::<(), devmm::Error>(())
/// ```
pub fn get_current_memory_resource(device: Device) -> Result<SharedResource> {
    if let Some(mr) = overridden(device) {
        return Ok(mr);
    }
    if let Some(mr) = lookup(&GLOBAL.read().unwrap_or_else(|e| e.into_inner()), device) {
        return Ok(Arc::clone(mr));
    }
    let default = crate::runtime::runtime_for(device)?.default_resource(device)?;
    let default = scope().adopt_default(default);
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

/// Makes `mr` current for its device in the caller's context (this
/// thread, or the installed [`OverrideScope`]'s notion of it) until the
/// guard drops. Guards nest; dropping one restores what was current
/// before it.
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
    ResourceGuard {
        _entry: scope().enter(Arc::clone(&mr)),
        mr,
        _not_send: PhantomData,
    }
}

/// Keeps a [`using_memory_resource`] override in force; restores on drop.
///
/// Not `Send`: the override belongs to the context that made it.
#[must_use = "the override ends when the guard drops"]
pub struct ResourceGuard {
    mr: SharedResource,
    /// The scope's record of the override: dropping it restores.
    _entry: Box<dyn Any>,
    _not_send: PhantomData<*const ()>,
}

impl std::fmt::Debug for ResourceGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceGuard")
            .field("mr", &self.mr)
            .finish_non_exhaustive()
    }
}

impl ResourceGuard {
    /// The resource this guard made current.
    pub fn resource(&self) -> &SharedResource {
        &self.mr
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MallocMemoryResource;

    fn malloc() -> SharedResource {
        Arc::new(MallocMemoryResource::new())
    }

    #[test]
    fn thread_scope_restores_out_of_order_and_stays_per_thread() {
        let (a, b) = (malloc(), malloc());
        let outer = using_memory_resource(Arc::clone(&a));
        let inner = using_memory_resource(Arc::clone(&b));
        assert!(Arc::ptr_eq(&ThreadScope.current(Device::CPU).unwrap(), &b));
        std::thread::spawn(|| assert!(ThreadScope.current(Device::CPU).is_none()))
            .join()
            .unwrap();
        drop(outer);
        assert!(Arc::ptr_eq(&ThreadScope.current(Device::CPU).unwrap(), &b));
        drop(inner);
        assert!(ThreadScope.current(Device::CPU).is_none());
    }

    #[test]
    fn a_scope_cannot_be_installed_after_thread_overrides() {
        struct Never;
        impl OverrideScope for Never {
            fn current(&self, _: Device) -> Option<SharedResource> {
                None
            }
            fn enter(&self, _: SharedResource) -> Box<dyn Any> {
                Box::new(())
            }
        }
        drop(using_memory_resource(malloc()));
        let err = set_override_scope(Never).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
        assert!(SCOPE.get().is_none());
    }
}
