//! `devmm info`: runtimes, devices, memory and the resource chain per device.

use std::process::ExitCode;

use serde::Serialize;

use crate::discovery;
use crate::error::CliError;
use crate::report::{self, Report};
use crate::table::{Align, Table};
use crate::units;

/// Options of `devmm info`.
#[derive(Debug, clap::Args)]
pub(crate) struct InfoArgs {
    /// Print the report as JSON instead of tables.
    #[arg(long)]
    json: bool,
}

/// What `devmm info` found.
#[derive(Debug, Serialize)]
pub(crate) struct InfoReport {
    runtimes: Vec<RuntimeEntry>,
    devices: Vec<DeviceEntry>,
}

#[derive(Debug, Serialize)]
struct RuntimeEntry {
    name: String,
    available: bool,
    /// How many devices it reported (absent when it is missing).
    #[serde(skip_serializing_if = "Option::is_none")]
    devices: Option<usize>,
    /// Why it is missing, or why its devices could not be listed.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

#[derive(Debug, Serialize)]
struct DeviceEntry {
    device: String,
    runtime: String,
    /// Bytes; absent when the runtime could not tell.
    free_bytes: Option<usize>,
    total_bytes: Option<usize>,
    /// The current resource, outermost first.
    resource_chain: Option<String>,
    /// What could not be found out about this device.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    errors: Vec<String>,
}

/// Runs `devmm info`. A device whose memory or resource cannot be read is
/// still listed, with the reason; the command itself only fails when the
/// report cannot be written.
pub(crate) fn run(args: &InfoArgs) -> Result<ExitCode, CliError> {
    report::emit(&collect(), args.json)?;
    Ok(ExitCode::SUCCESS)
}

fn collect() -> InfoReport {
    let mut runtimes = Vec::new();
    let mut devices = Vec::new();
    for found in discovery::runtimes() {
        let rt = match found.runtime {
            Ok(rt) => rt,
            Err(reason) => {
                runtimes.push(RuntimeEntry {
                    name: found.name,
                    available: false,
                    devices: None,
                    reason: Some(reason),
                });
                continue;
            }
        };
        match rt.devices() {
            Ok(list) => {
                runtimes.push(RuntimeEntry {
                    name: found.name.clone(),
                    available: true,
                    devices: Some(list.len()),
                    reason: None,
                });
                devices.extend(list.into_iter().map(|device| {
                    let mut errors = Vec::new();
                    let memory = rt
                        .memory_info(device)
                        .map_err(|e| errors.push(format!("memory: {e}")))
                        .ok();
                    let chain = devmm::get_current_memory_resource(device)
                        .map(|mr| devmm::resource_chain(&*mr))
                        .map_err(|e| errors.push(format!("resource: {e}")))
                        .ok();
                    DeviceEntry {
                        device: device.to_string(),
                        runtime: found.name.clone(),
                        free_bytes: memory.map(|m| m.free),
                        total_bytes: memory.map(|m| m.total),
                        resource_chain: chain,
                        errors,
                    }
                }));
            }
            Err(e) => runtimes.push(RuntimeEntry {
                name: found.name,
                available: true,
                devices: None,
                reason: Some(format!("cannot list devices: {e}")),
            }),
        }
    }
    InfoReport { runtimes, devices }
}

impl Report for InfoReport {
    fn to_text(&self) -> String {
        let mut runtimes = Table::new(&[
            ("RUNTIME", Align::Left),
            ("STATUS", Align::Left),
            ("DEVICES", Align::Right),
            ("DETAIL", Align::Left),
        ]);
        for rt in &self.runtimes {
            runtimes.row(vec![
                rt.name.clone(),
                if rt.available { "available" } else { "missing" }.to_owned(),
                rt.devices.map(|n| n.to_string()).unwrap_or_default(),
                rt.reason.clone().unwrap_or_default(),
            ]);
        }
        let mut devices = Table::new(&[
            ("DEVICE", Align::Left),
            ("RUNTIME", Align::Left),
            ("FREE", Align::Right),
            ("TOTAL", Align::Right),
            ("RESOURCE CHAIN", Align::Left),
        ]);
        let unknown = || "?".to_owned();
        for d in &self.devices {
            devices.row(vec![
                d.device.clone(),
                d.runtime.clone(),
                d.free_bytes.map_or_else(unknown, units::bytes),
                d.total_bytes.map_or_else(unknown, units::bytes),
                d.resource_chain.clone().unwrap_or_else(unknown),
            ]);
        }
        let mut text = format!(
            "Runtimes\n\n{}\nDevices\n\n{}",
            runtimes.render(),
            devices.render()
        );
        for d in &self.devices {
            for e in &d.errors {
                text.push_str(&format!("{}: {e}\n", d.device));
            }
        }
        text
    }
}
