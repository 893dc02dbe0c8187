//! Which runtimes this machine has, as devmm sees them, and why the others
//! are missing.

use std::sync::Arc;

use devmm::runtime::RUNTIME_ENV;
use devmm::{Device, DeviceRuntime, DeviceType};

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

/// Every device of every runtime that loaded, with its runtime.
///
/// A runtime that loads but cannot list its devices is an error here: the
/// commands that measure or check devices must not skip one silently.
pub(crate) fn available_devices() -> devmm::Result<Vec<(Arc<dyn DeviceRuntime>, Device)>> {
    let mut devices = Vec::new();
    for found in runtimes() {
        if let Ok(rt) = found.runtime {
            for device in rt.devices()? {
                devices.push((Arc::clone(&rt), device));
            }
        }
    }
    Ok(devices)
}

/// The devices `wanted` names, or every available one when it names none.
/// Naming a device that is not available is an error listing those that are.
pub(crate) fn select_devices(
    wanted: &[Device],
) -> devmm::Result<Vec<(Arc<dyn DeviceRuntime>, Device)>> {
    let available = available_devices()?;
    if wanted.is_empty() {
        return Ok(available);
    }
    wanted
        .iter()
        .map(|&device| {
            available
                .iter()
                .find(|(_, d)| *d == device)
                .cloned()
                .ok_or_else(|| {
                    let names: Vec<String> = available.iter().map(|(_, d)| d.to_string()).collect();
                    devmm::Error::InvalidArgument {
                        reason: format!(
                            "device {device} is not available; available: {} (see devmm info)",
                            names.join(", ")
                        ),
                    }
                })
        })
        .collect()
}
