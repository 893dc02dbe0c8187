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

use std::cell::RefCell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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

/// One entered override: the token [`exit_override`] takes back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OverrideEntry(u64);

impl OverrideEntry {
    fn next() -> OverrideEntry {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        OverrideEntry(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// The overrides in force in one context (a thread, a Python `contextvars`
/// context), innermost first: the one stack of the registry. It is a
/// persistent chain, so a context that copies it (a Python task copying
/// its parent's context) shares it, and an entry or exit in one context
/// never changes another's. Scopes ([`OverrideScope`]) only keep it.
#[derive(Clone, Default)]
pub struct Overrides(Option<Arc<Frame>>);

/// One override of the chain.
struct Frame {
    entry: OverrideEntry,
    mr: SharedResource,
    /// Entered by [`push_override`] (closed by [`pop_override`]), not by a
    /// guard or a block.
    pushed: bool,
    parent: Overrides,
}

impl Drop for Frame {
    /// Unlinks the parents this frame alone holds one by one: a chain
    /// thousands deep (a loop of `push_statistics` never popped) dropped
    /// recursively would overflow the native stack.
    fn drop(&mut self) {
        let mut next = self.parent.0.take();
        while let Some(frame) = next {
            next = match Arc::try_unwrap(frame) {
                Ok(mut only) => only.parent.0.take(),
                // Another chain shares the rest: it stays for that one.
                Err(_) => None,
            };
        }
    }
}

impl Overrides {
    /// Whether no override is in force.
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// The innermost override for `device`: the rule every lookup follows.
    pub fn innermost(&self, device: Device) -> Option<SharedResource> {
        self.frames()
            .find(|f| f.mr.device() == device)
            .map(|f| Arc::clone(&f.mr))
    }

    fn frames(&self) -> impl Iterator<Item = &Frame> {
        std::iter::successors(self.0.as_deref(), |f| f.parent.0.as_deref())
    }

    fn entered(&self, mr: SharedResource, pushed: bool) -> (Overrides, OverrideEntry) {
        let entry = OverrideEntry::next();
        let frame = Frame {
            entry,
            mr,
            pushed,
            parent: self.clone(),
        };
        (Overrides(Some(Arc::new(frame))), entry)
    }

    /// The chain without the innermost frame `which` picks, wherever it is
    /// (the overrides entered after it stay in force), that frame's
    /// resource, and whether it was the innermost of all; `None` when no
    /// frame is picked. The one exit rule.
    fn without(&self, which: impl Fn(&Frame) -> bool) -> Option<(Overrides, SharedResource, bool)> {
        let mut above = Vec::new();
        let mut frames = self.frames();
        let found = loop {
            let frame = frames.next()?;
            if which(frame) {
                break frame;
            }
            above.push(frame);
        };
        let rest = above.iter().rev().fold(found.parent.clone(), |parent, f| {
            Overrides(Some(Arc::new(Frame {
                entry: f.entry,
                mr: Arc::clone(&f.mr),
                pushed: f.pushed,
                parent,
            })))
        });
        Some((rest, Arc::clone(&found.mr), above.is_empty()))
    }
}

impl std::fmt::Debug for Overrides {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.frames().map(|f| &f.mr))
            .finish()
    }
}

/// Where the registry keeps each context's [`Overrides`]: the scope decides
/// what "the caller's context" is (a thread, a Python `contextvars`
/// context). It only keeps the chain; entering, looking up and exiting are
/// the registry's.
///
/// [`get`](Self::get) runs on every `empty()` without a resource, so an
/// implementation answers the no-override case without locking or
/// calling out (the Python scope checks a flag before it asks Python).
///
/// ```
/// use std::sync::Mutex;
/// use devmm::{OverrideScope, Overrides};
/// /// One process-wide chain: overrides seen by every thread.
/// #[derive(Default)]
/// struct Global(Mutex<Overrides>);
/// impl OverrideScope for Global {
///     fn get(&self) -> Overrides {
///         self.0.lock().unwrap().clone()
///     }
///     fn set(&self, overrides: Overrides) {
///         *self.0.lock().unwrap() = overrides;
///     }
/// }
/// // Installed with `devmm::set_override_scope(Global::default())`, once per process.
/// ```
pub trait OverrideScope: Send + Sync {
    /// The overrides of the caller's context.
    fn get(&self) -> Overrides;

    /// Makes `overrides` those of the caller's context.
    fn set(&self, overrides: Overrides);

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
    /// This thread's overrides.
    static OVERRIDES: RefCell<Overrides> = RefCell::new(Overrides::default());
}

/// Whether any thread-scope override was ever made: a scope installed
/// later would not see it, so installing is refused then.
static THREAD_SCOPE_USED: AtomicBool = AtomicBool::new(false);

impl OverrideScope for ThreadScope {
    fn get(&self) -> Overrides {
        // During thread teardown the chain may be gone already: none then.
        OVERRIDES
            .try_with(|o| o.try_borrow().map(|o| o.clone()).unwrap_or_default())
            .unwrap_or_default()
    }

    fn set(&self, overrides: Overrides) {
        if !overrides.is_empty() {
            THREAD_SCOPE_USED.store(true, Ordering::Relaxed);
        }
        let _ = OVERRIDES.try_with(|o| {
            if let Ok(mut o) = o.try_borrow_mut() {
                *o = overrides;
            }
        });
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
        Some(scope) => scope.get().innermost(device),
        None => OVERRIDES.with_borrow(|o| o.innermost(device)),
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
/// #     fn get(&self) -> devmm::Overrides { devmm::Overrides::default() }
/// #     fn set(&self, _: devmm::Overrides) {}
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
/// guard drops. Guards nest; dropping one ends its override wherever it is
/// in the chain (the overrides entered after it stay in force), as
/// [`exit_override`] does.
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
        entry: enter_override(Arc::clone(&mr)),
        mr,
        _not_send: PhantomData,
    }
}

/// Makes `mr` current for its device in the caller's context until
/// [`exit_override`] takes the returned entry back: a guard-free
/// [`using_memory_resource`], for bindings whose blocks end in a call (a
/// Python `with` block's `__exit__`).
pub fn enter_override(mr: SharedResource) -> OverrideEntry {
    enter(mr, false)
}

fn enter(mr: SharedResource, pushed: bool) -> OverrideEntry {
    let scope = scope();
    let (overrides, entry) = scope.get().entered(mr, pushed);
    scope.set(overrides);
    entry
}

/// Ends the override `entry` in the caller's context, wherever it is in the
/// chain: the overrides entered after it stay in force. It is ended all the
/// same when it was not the innermost, but that is an
/// [`Error::OverrideOrder`], as is an entry not in force in this context
/// (ended already, or entered in another thread or task).
///
/// ```
/// use std::sync::Arc;
/// use devmm::{enter_override, exit_override, get_current_memory_resource, Device, HeapMemoryResource};
/// let (a, b): (Arc<dyn devmm::MemoryResource>, Arc<dyn devmm::MemoryResource>) =
///     (Arc::new(HeapMemoryResource::new()), Arc::new(HeapMemoryResource::new()));
/// let outer = enter_override(Arc::clone(&a));
/// let inner = enter_override(Arc::clone(&b));
/// assert!(exit_override(outer).is_err()); // out of order: ended, b stays in force
/// assert!(Arc::ptr_eq(&get_current_memory_resource(Device::CPU)?, &b));
/// exit_override(inner)?;
/// assert!(exit_override(inner).is_err()); // not in force any more
/// # Ok::<(), devmm::Error>(())
/// ```
pub fn exit_override(entry: OverrideEntry) -> Result<()> {
    ended(end(|f| f.entry == entry), || {
        "the override is not in force in this context: it ended already, or was entered in \
         another thread or task; end an override in the context that entered it, once"
            .into()
    })
}

/// [`exit_override`] of the innermost override of `mr` in the caller's
/// context, for a binding whose block knows its resource, not its entry.
pub fn exit_override_of(mr: &SharedResource) -> Result<()> {
    ended(end(|f| !f.pushed && Arc::ptr_eq(&f.mr, mr)), || {
        format!(
            "no override of {mr:?} is in force in this context: it ended already, or was \
             entered in another thread or task; end an override in the context that entered \
             it, once"
        )
    })
}

/// Ends the innermost override `which` picks in the caller's context;
/// its resource, and whether it was the innermost of all.
fn end(which: impl Fn(&Frame) -> bool) -> Option<(SharedResource, bool)> {
    let scope = scope();
    let (rest, mr, innermost) = scope.get().without(which)?;
    scope.set(rest);
    Some((mr, innermost))
}

/// What ending an override says: nothing when it was the innermost, an
/// [`Error::OverrideOrder`] when it was not or when none was in force
/// (`not_found` says which).
fn ended(ended: Option<(SharedResource, bool)>, not_found: impl FnOnce() -> String) -> Result<()> {
    match ended {
        Some((_, true)) => Ok(()),
        Some((mr, false)) => Err(Error::OverrideOrder {
            reason: format!(
                "the override of {mr:?} was not the innermost in this context: it ended, and the \
                 overrides entered after it stay in force; end overrides in reverse order of entry"
            ),
        }),
        None => Err(Error::OverrideOrder {
            reason: not_found(),
        }),
    }
}

/// Makes `mr` current for its device in the caller's context until
/// [`pop_override`] closes it: the stack `push_statistics` keeps, the same
/// chain as every other override.
pub fn push_override(mr: SharedResource) {
    enter(mr, true);
}

/// Closes the innermost override [`push_override`] opened on `device` in
/// the caller's context (the overrides entered after it stay in force) and
/// returns its resource; `None` when none is open.
pub fn pop_override(device: Device) -> Option<SharedResource> {
    end(|f| f.pushed && f.mr.device() == device).map(|(mr, _)| mr)
}

/// Keeps a [`using_memory_resource`] override in force; ends it on drop.
///
/// Not `Send`: the override belongs to the context that made it.
#[must_use = "the override ends when the guard drops"]
pub struct ResourceGuard {
    mr: SharedResource,
    entry: OverrideEntry,
    _not_send: PhantomData<*const ()>,
}

impl Drop for ResourceGuard {
    fn drop(&mut self) {
        // Out of order is allowed for a guard (Rust drops in any order the
        // code says); the override ends either way.
        let _ = exit_override(self.entry);
    }
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
        assert!(Arc::ptr_eq(&overridden(Device::CPU).unwrap(), &b));
        std::thread::spawn(|| assert!(overridden(Device::CPU).is_none()))
            .join()
            .unwrap();
        drop(outer);
        assert!(Arc::ptr_eq(&overridden(Device::CPU).unwrap(), &b));
        drop(inner);
        assert!(overridden(Device::CPU).is_none());
    }

    #[test]
    fn an_exit_removes_its_entry_and_keeps_the_chain_a_copy_shares() {
        let (a, b, c) = (malloc(), malloc(), malloc());
        let (one, ea) = Overrides::default().entered(Arc::clone(&a), false);
        let (two, eb) = one.entered(Arc::clone(&b), true);
        let (three, ec) = two.entered(Arc::clone(&c), false);
        let (rest, mr, innermost) = three.without(|f| f.entry == eb).unwrap();
        assert!(Arc::ptr_eq(&mr, &b) && !innermost);
        let kept: Vec<_> = rest.frames().map(|f| f.entry).collect();
        assert_eq!(kept, [ec, ea]);
        // The chain it came from is unchanged (a copied context keeps it).
        assert_eq!(three.frames().count(), 3);
        assert!(rest.without(|f| f.entry == eb).is_none());
        assert!(rest.without(|f| f.entry == ec).unwrap().2);
    }

    #[test]
    fn a_deep_chain_drops_without_recursion() {
        // Deep enough to overflow a thread's stack if each frame dropped its
        // parent recursively; miri checks the unlinking at a smaller depth.
        let depth = if cfg!(miri) { 1_000 } else { 300_000 };
        let mr = malloc();
        let mut chain = Overrides::default();
        for _ in 0..depth {
            chain = chain.entered(Arc::clone(&mr), true).0;
        }
        let shared = chain.clone();
        drop(chain);
        assert_eq!(shared.frames().count(), depth);
        std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || drop(shared))
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(Arc::strong_count(&mr), 1);
    }

    #[test]
    fn a_scope_cannot_be_installed_after_thread_overrides() {
        struct Never;
        impl OverrideScope for Never {
            fn get(&self) -> Overrides {
                Overrides::default()
            }
            fn set(&self, _: Overrides) {}
        }
        drop(using_memory_resource(malloc()));
        let err = set_override_scope(Never).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
        assert!(SCOPE.get().is_none());
    }
}
