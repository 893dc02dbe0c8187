//! Runtime discovery: cheap probes, loading on demand, one instance each.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Once, OnceLock, RwLock};

use crate::device::{Device, DeviceType};
use crate::error::{Error, Result};
use crate::stream::{Stream, StreamSentinel};

use super::DeviceRuntime;

/// The environment variable that restricts discovery to one runtime and
/// makes its device 0 the default device (`cpu`, `cuda` or `rocm`).
pub const RUNTIME_ENV: &str = "DEVMM_RUNTIME";

/// How a runtime is found and loaded.
///
/// ```
/// use devmm::{RuntimeRegistration, DeviceType};
/// let reg = RuntimeRegistration {
///     name: "mine",
///     device_types: &[DeviceType::Cpu],
///     probe: || true,
///     load: || devmm::runtime_for("cpu"),
/// };
/// devmm::register_runtime(reg)?;
/// assert!(devmm::runtime_names().contains(&"mine".to_string()));
/// # Ok::<(), devmm::Error>(())
/// ```
#[derive(Clone, Copy)]
pub struct RuntimeRegistration {
    /// The name `runtime_for` and `DEVMM_RUNTIME` use.
    pub name: &'static str,
    /// The device types the runtime serves, primary first.
    pub device_types: &'static [DeviceType],
    /// A cheap check that the platform is present (a library exists); it
    /// must not resolve a driver table.
    pub probe: fn() -> bool,
    /// Loads the runtime; called at most once successfully.
    pub load: fn() -> Result<Arc<dyn DeviceRuntime>>,
}

impl fmt::Debug for RuntimeRegistration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuntimeRegistration")
            .field("name", &self.name)
            .field("device_types", &self.device_types)
            .finish_non_exhaustive()
    }
}

/// What [`runtime_for`] accepts: a device, a device type, or a name.
#[derive(Clone, Copy, Debug)]
pub enum RuntimeSelector<'a> {
    /// The runtime serving this device's type.
    Device(Device),
    /// The runtime serving this type.
    Type(DeviceType),
    /// The runtime of this name.
    Name(&'a str),
}

impl From<Device> for RuntimeSelector<'_> {
    fn from(device: Device) -> Self {
        RuntimeSelector::Device(device)
    }
}

impl From<DeviceType> for RuntimeSelector<'_> {
    fn from(ty: DeviceType) -> Self {
        RuntimeSelector::Type(ty)
    }
}

impl<'a> From<&'a str> for RuntimeSelector<'a> {
    fn from(name: &'a str) -> Self {
        RuntimeSelector::Name(name)
    }
}

struct Registry {
    registrations: Vec<RuntimeRegistration>,
    /// Runtimes a binding loads itself ([`register_external_runtime`]).
    external: Vec<String>,
    loaded: HashMap<&'static str, Arc<dyn DeviceRuntime>>,
}

fn registry() -> &'static RwLock<Registry> {
    static REGISTRY: OnceLock<RwLock<Registry>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        RwLock::new(Registry {
            registrations: super::builtin_registrations(),
            external: Vec::new(),
            loaded: HashMap::new(),
        })
    })
}

/// `DEVMM_RUNTIME` as the last discovery read it. Discovery reads the
/// environment each time ([`env_override`]), so a value a program (or a
/// test) sets after start-up is heard, as the seed's is; the default-device
/// lookup on the allocation path reads only this copy, with one atomic
/// load while the variable is unset (the environment lock and a scan of
/// the environment would cost more than the rest of a small `empty`).
static LAST_OVERRIDE: RwLock<Option<String>> = RwLock::new(None);
static OVERRIDE_SET: AtomicBool = AtomicBool::new(false);

/// `DEVMM_RUNTIME` as it is now, kept as [`last_override`]'s copy.
fn env_override() -> Option<String> {
    let value = std::env::var(RUNTIME_ENV).ok().filter(|v| !v.is_empty());
    let mut last = LAST_OVERRIDE.write().unwrap_or_else(|e| e.into_inner());
    OVERRIDE_SET.store(value.is_some(), Ordering::Release);
    last.clone_from(&value);
    value
}

/// `DEVMM_RUNTIME` as the last discovery read it (read now the first time).
fn last_override() -> Option<String> {
    static FIRST: Once = Once::new();
    FIRST.call_once(|| drop(env_override()));
    if !OVERRIDE_SET.load(Ordering::Acquire) {
        return None;
    }
    LAST_OVERRIDE
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
}

/// Checks a third-party runtime as registered: the runtime registered as
/// `registered_as` carries that name and serves at least one device type.
/// [`register_runtime`] checks a Rust registration with it, and the Python
/// package the runtime a `devmm.runtimes` entry point makes, so both refuse
/// alike (`Error::InvalidArgument`).
///
/// ```
/// use devmm::DeviceType;
/// use devmm::runtime::check_runtime_plugin;
/// assert!(check_runtime_plugin("mine", "mine", &[DeviceType::Cpu]).is_ok());
/// let none = check_runtime_plugin("mine", "mine", &[]).unwrap_err();
/// assert_eq!(
///     none.to_string(),
///     "invalid argument: runtime \"mine\" registers no device types; list at least its primary one"
/// );
/// assert!(check_runtime_plugin("mine", "theirs", &[DeviceType::Cpu]).is_err());
/// ```
pub fn check_runtime_plugin(
    registered_as: &str,
    name: &str,
    device_types: &[DeviceType],
) -> Result<()> {
    if name != registered_as {
        return Err(Error::InvalidArgument {
            reason: format!(
                "the runtime registered as {registered_as:?} is named {name:?}; register a \
                 runtime under its own name"
            ),
        });
    }
    if device_types.is_empty() {
        return Err(Error::InvalidArgument {
            reason: format!(
                "runtime {name:?} registers no device types; list at least its primary one"
            ),
        });
    }
    Ok(())
}

/// Adds a third-party runtime. Names are unique.
pub fn register_runtime(registration: RuntimeRegistration) -> Result<()> {
    check_runtime_plugin(
        registration.name,
        registration.name,
        registration.device_types,
    )?;
    let mut reg = registry().write().unwrap_or_else(|e| e.into_inner());
    if reg
        .registrations
        .iter()
        .any(|r| r.name == registration.name)
    {
        return Err(Error::InvalidArgument {
            reason: format!(
                "a runtime named {:?} is already registered; pick another name",
                registration.name
            ),
        });
    }
    reg.registrations.push(registration);
    Ok(())
}

/// Names a runtime that a binding discovers and loads itself, outside
/// this registry: the Python package's `devmm.runtimes` entry points. It
/// is listed by [`runtime_names`] after the registered runtimes and
/// accepted by `DEVMM_RUNTIME` (which then leaves `cpu:0` the default
/// device); [`runtime_for`] cannot load it. Naming one twice is harmless;
/// a registered runtime's name is refused.
///
/// ```
/// devmm::runtime::register_external_runtime("python-only")?;
/// assert!(devmm::runtime_names().contains(&"python-only".to_string()));
/// assert!(devmm::runtime_for("python-only").is_err());
/// assert!(devmm::runtime::register_external_runtime("cpu").is_err());
/// # Ok::<(), devmm::Error>(())
/// ```
pub fn register_external_runtime(name: &str) -> Result<()> {
    let mut reg = registry().write().unwrap_or_else(|e| e.into_inner());
    add_external(&mut reg, name)
}

/// Names exactly `names` as the [external](register_external_runtime)
/// runtimes, in place of those named before, in one step under the
/// registry's lock: no discovery sees the old list half replaced. Returns
/// each name refused (a registered runtime's) with why; the rest are
/// named. The Python package calls this with the `devmm.runtimes` entry
/// points each scan finds, and a scan replaces the one before.
///
/// ```
/// use devmm::runtime::set_external_runtimes;
/// assert!(set_external_runtimes(&["first", "second"]).is_empty());
/// let refused = set_external_runtimes(&["second", "cpu"]);
/// assert_eq!(refused.len(), 1);
/// assert_eq!(refused[0].0, "cpu");
/// let names = devmm::runtime_names();
/// assert!(names.contains(&"second".to_string()));
/// assert!(!names.contains(&"first".to_string()));
/// ```
pub fn set_external_runtimes<S: AsRef<str>>(names: &[S]) -> Vec<(String, Error)> {
    let mut reg = registry().write().unwrap_or_else(|e| e.into_inner());
    reg.external.clear();
    names
        .iter()
        .map(AsRef::as_ref)
        .filter_map(|name| Some((name.to_owned(), add_external(&mut reg, name).err()?)))
        .collect()
}

/// [`register_external_runtime`]'s rule, under the caller's lock.
fn add_external(reg: &mut Registry, name: &str) -> Result<()> {
    if reg.registrations.iter().any(|r| r.name == name) {
        return Err(Error::InvalidArgument {
            reason: format!(
                "a runtime named {name:?} is already registered in devmm; the third-party runtime must pick another name"
            ),
        });
    }
    if !reg.external.iter().any(|n| n == name) {
        reg.external.push(name.to_owned());
    }
    Ok(())
}

/// The runtimes whose platform is present, by probing only: no driver table
/// is resolved; then the [external](register_external_runtime) ones. With
/// `DEVMM_RUNTIME` set, only that runtime (not probed: forced) and `cpu`.
///
/// ```
/// assert!(devmm::runtime_names().contains(&"cpu".to_string()));
/// ```
pub fn runtime_names() -> Vec<String> {
    let only = env_override();
    let only = only.as_deref();
    // Probes run outside the lock: a third party's probe may itself call
    // `runtime_for`, which takes the lock for writing on first load.
    let selected = |name: &str| only.is_none_or(|o| name == o || name == "cpu");
    let (candidates, external): (Vec<RuntimeRegistration>, Vec<String>) = {
        let reg = registry().read().unwrap_or_else(|e| e.into_inner());
        let candidates = reg.registrations.iter().filter(|r| selected(r.name));
        let external = reg.external.iter().filter(|n| selected(n));
        (candidates.copied().collect(), external.cloned().collect())
    };
    // The runtime DEVMM_RUNTIME names is forced, as the seed's: listed
    // without its probe, so loading it says why it cannot run.
    let probed = candidates
        .into_iter()
        .filter(|r| only == Some(r.name) || (r.probe)())
        .map(|r| r.name.to_owned());
    probed.chain(external).collect()
}

/// Every runtime that loads and can run here, in [`runtime_names`]'s
/// order: a runtime whose probe passed but which is unavailable when loaded
/// (its library without a driver behind it) is left out, and
/// [`runtime_for`] says why; any other failure to load is an error.
///
/// ```
/// let runtimes = devmm::available_runtimes()?;
/// assert!(runtimes.iter().any(|rt| rt.name() == "cpu"));
/// # Ok::<(), devmm::Error>(())
/// ```
pub fn available_runtimes() -> Result<Vec<Arc<dyn DeviceRuntime>>> {
    let mut runtimes = Vec::new();
    for name in runtime_names() {
        match runtime_for(name.as_str()) {
            Ok(runtime) => runtimes.push(runtime),
            // The probe found its library, but it cannot run here (a CUDA
            // runtime without a driver, as in CI containers): not available.
            Err(Error::RuntimeUnavailable { .. }) => {}
            Err(other) => return Err(other),
        }
    }
    Ok(runtimes)
}

/// Checks `DEVMM_RUNTIME` now, so a misspelt value fails at once (the
/// Python package calls this on import) rather than at the first
/// allocation: unset, or the name of a registered runtime.
///
/// ```
/// // Unset in the doctest's environment.
/// devmm::runtime::check_runtime_override()?;
/// # Ok::<(), devmm::Error>(())
/// ```
pub fn check_runtime_override() -> Result<()> {
    match env_override() {
        Some(name) => check_override_names_a_runtime(&name),
        None => Ok(()),
    }
}

/// Refuses a `DEVMM_RUNTIME` value `name` that names no registered runtime.
fn check_override_names_a_runtime(name: &str) -> Result<()> {
    let reg = registry().read().unwrap_or_else(|e| e.into_inner());
    let known: Vec<&str> = reg
        .registrations
        .iter()
        .map(|r| r.name)
        .chain(reg.external.iter().map(String::as_str))
        .collect();
    if known.contains(&name) {
        return Ok(());
    }
    Err(Error::RuntimeUnavailable {
        name: name.to_owned(),
        reason: format!(
            "{RUNTIME_ENV}={name:?} names no registered device runtime (registered: {}); set it to one of those or unset it",
            known.join(", ")
        ),
    })
}

/// The runtime for a device, a device type or a name, loaded on first use
/// and the same instance afterwards. A name with an index (`"cuda:1"`,
/// `"cpu:0"`) is a device's, and names the runtime of that device.
///
/// ```
/// use devmm::{runtime_for, Device, DeviceType};
/// let a = runtime_for(Device::CPU)?;
/// let b = runtime_for(DeviceType::Cpu)?;
/// assert!(std::sync::Arc::ptr_eq(&a, &b));
/// assert!(std::sync::Arc::ptr_eq(&a, &runtime_for("cpu:0")?));
/// assert!(runtime_for("tpu").is_err());
/// # Ok::<(), devmm::Error>(())
/// ```
pub fn runtime_for<'a>(selector: impl Into<RuntimeSelector<'a>>) -> Result<Arc<dyn DeviceRuntime>> {
    let mut selector = selector.into();
    if let RuntimeSelector::Name(name) = selector
        && name.contains(':')
        && let Ok(device) = name.parse::<Device>()
    {
        selector = RuntimeSelector::Device(device);
    }
    let registration = {
        let reg = registry().read().unwrap_or_else(|e| e.into_inner());
        let found = reg.registrations.iter().find(|r| match selector {
            RuntimeSelector::Name(name) => r.name == name,
            RuntimeSelector::Type(ty) => r.device_types.contains(&ty),
            RuntimeSelector::Device(d) => r.device_types.contains(&d.ty()),
        });
        let Some(found) = found.copied() else {
            if let RuntimeSelector::Name(name) = selector
                && reg.external.iter().any(|n| n == name)
            {
                return Err(Error::RuntimeUnavailable {
                    name: name.to_owned(),
                    reason:
                        "it is a third-party runtime its binding loads (a Python devmm.runtimes \
                             entry point: devmm.runtime_for loads it there), not a Rust runtime"
                            .into(),
                });
            }
            let known: Vec<&str> = reg.registrations.iter().map(|r| r.name).collect();
            return Err(Error::RuntimeUnavailable {
                name: selector_name(selector),
                reason: format!(
                    "no runtime is registered for it (registered: {}); register one with devmm::register_runtime",
                    known.join(", ")
                ),
            });
        };
        if let Some(rt) = reg.loaded.get(found.name) {
            return Ok(Arc::clone(rt));
        }
        found
    };
    // Loading may take a while (dlopen); do it outside the lock, then keep
    // whichever instance got in first so every caller sees the same one.
    let loaded = (registration.load)()?;
    let mut reg = registry().write().unwrap_or_else(|e| e.into_inner());
    Ok(Arc::clone(
        reg.loaded.entry(registration.name).or_insert(loaded),
    ))
}

fn is_external(name: &str) -> bool {
    let reg = registry().read().unwrap_or_else(|e| e.into_inner());
    reg.external.iter().any(|n| n == name)
}

fn selector_name(selector: RuntimeSelector<'_>) -> String {
    match selector {
        RuntimeSelector::Name(name) => name.to_owned(),
        RuntimeSelector::Type(ty) => ty.runtime_name().to_owned(),
        RuntimeSelector::Device(d) => d.ty().runtime_name().to_owned(),
    }
}

/// The built-in stream `which` of `device` (its default stream when
/// `None`): what an operation on `device` is ordered on when no stream is
/// given. The CPU's default needs no lookup.
///
/// ```
/// use devmm::{runtime::stream_for, Device, LEGACY_DEFAULT};
/// assert_eq!(stream_for(Device::CPU, None)?, devmm::Stream::cpu());
/// assert_eq!(stream_for(Device::CPU, Some(LEGACY_DEFAULT))?.handle(), 0);
/// # Ok::<(), devmm::Error>(())
/// ```
pub fn stream_for(device: Device, which: Option<StreamSentinel>) -> Result<Stream> {
    match which {
        None if device == Device::CPU => Ok(Stream::cpu()),
        None => runtime_for(device)?.default_stream(device),
        Some(which) => runtime_for(device)?.stream(device, which),
    }
}

/// The device [`empty`](crate::empty) uses when none is given: `cpu:0`, or
/// device 0 of the runtime `DEVMM_RUNTIME` names (`cpu:0` for an
/// [external](register_external_runtime) one, whose devices only its
/// binding knows).
///
/// ```
/// # if std::env::var("DEVMM_RUNTIME").is_err() {
/// assert_eq!(devmm::default_device()?, devmm::Device::CPU);
/// # }
/// # Ok::<(), devmm::Error>(())
/// ```
pub fn default_device() -> Result<Device> {
    match last_override().as_deref() {
        None => Ok(Device::CPU),
        Some(name) if is_external(name) => Ok(Device::CPU),
        Some(name) => {
            check_override_names_a_runtime(name)?;
            let rt = runtime_for(name)?;
            let ty = rt.device_types()[0];
            Ok(Device::new(ty, 0))
        }
    }
}
