//! Which runtimes this machine has, as devmm sees them, and why the others
//! are missing.

use std::sync::Arc;

use devmm::runtime::RUNTIME_ENV;
use devmm::{DeviceRuntime, DeviceType};

/// One runtime devmm knows of: loaded, or the reason it is not.
#[derive(Debug)]
pub(crate) struct FoundRuntime {
    /// `cpu`, `cuda`, `rocm` or a third party's name.
    pub(crate) name: String,
    /// The loaded runtime, or the message saying why it is missing.
    pub(crate) runtime: Result<Arc<dyn DeviceRuntime>, String>,
}

/// Every runtime devmm ships or has had registered, in a stable order: the
/// built-in platforms first (cpu, cuda, rocm), then third-party runtimes.
///
/// Runtimes the probe finds are loaded; the others are loaded too when
/// `DEVMM_RUNTIME` does not exclude them, because the load error is what
/// explains their absence (which library was looked for, which symbol was
/// missing).
pub(crate) fn runtimes() -> Vec<FoundRuntime> {
    let mut names: Vec<String> = Vec::new();
    let builtin = DeviceType::ALL
        .iter()
        .map(|ty| ty.runtime_name().to_owned());
    for name in builtin.chain(devmm::runtime_names()) {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    let only = std::env::var(RUNTIME_ENV).ok().filter(|v| !v.is_empty());
    names
        .into_iter()
        .map(|name| {
            let runtime = match &only {
                Some(only) if name != *only && name != "cpu" => {
                    let kept = if only == "cpu" {
                        "cpu".to_owned()
                    } else {
                        format!("{only} and cpu")
                    };
                    Err(format!(
                        "not probed: {RUNTIME_ENV}={only} limits discovery to {kept}"
                    ))
                }
                _ => devmm::runtime_for(name.as_str()).map_err(|e| e.to_string()),
            };
            FoundRuntime { name, runtime }
        })
        .collect()
}
