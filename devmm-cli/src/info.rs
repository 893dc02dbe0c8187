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
    /// The vendor library it was loaded from, for runtimes over one.
    #[serde(skip_serializing_if = "Option::is_none")]
    library: Option<String>,
    /// The runtime library's version (`13.0`), for runtimes over one.
    #[serde(skip_serializing_if = "Option::is_none")]
    runtime_version: Option<String>,
    /// The kernel driver's version, where one answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    driver_version: Option<String>,
    /// Every vendor library tried, `path (outcome)`, the one used last
    /// (a library that failed to load or cannot run is passed over).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    discovery: Vec<String>,
    /// Where its pinned host memory comes from, for runtimes that have it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pinned_memory: Option<PinnedEntry>,
}

/// Where a runtime's pinned host memory comes from.
#[derive(Debug, Serialize)]
struct PinnedEntry {
    /// The pinned-memory device (`cuda_host:0`).
    device: String,
    /// Whether a stream-ordered pool of pinned host memory serves it (CUDA
    /// 12.2 on), rather than the synchronous page-locked allocator
    /// (`cudaMallocHost`, `hipHostMalloc`).
    host_pool: bool,
    /// Its resource, as `Debug` names it.
    resource: String,
}

/// Where `rt`'s pinned host memory comes from: the default resource of its
/// pinned-memory device, which is stream-ordered only over a host pool.
fn pinned_of(rt: &dyn devmm::DeviceRuntime) -> Option<Result<PinnedEntry, String>> {
    let ty = rt.device_types().iter().copied().find(|ty| {
        matches!(
            ty,
            devmm::DeviceType::CudaHost | devmm::DeviceType::RocmHost
        )
    })?;
    let device = devmm::Device::new(ty, 0);
    Some(match rt.default_resource(device) {
        Ok(mr) => Ok(PinnedEntry {
            device: device.to_string(),
            host_pool: mr.stream_ordered(),
            resource: format!("{mr:?}"),
        }),
        Err(e) => Err(format!("pinned memory: {e}")),
    })
}

#[derive(Debug, Serialize)]
struct DeviceEntry {
    device: String,
    runtime: String,
    /// The product name, where the runtime tells.
    name: Option<String>,
    /// `major.minor`, on CUDA.
    compute_capability: Option<String>,
    pci_bus_id: Option<String>,
    /// Whether stream-ordered allocation (memory pools) is supported.
    memory_pools: Option<bool>,
    /// Bytes; absent when the runtime could not tell.
    used_bytes: Option<usize>,
    free_bytes: Option<usize>,
    total_bytes: Option<usize>,
    /// The current resource, outermost first.
    resource_chain: Option<String>,
    /// The figures of the pool the current resource allocates from, when
    /// a link of its chain has a pool of its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pool: Option<PoolEntry>,
    /// What could not be found out about this device.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    errors: Vec<String>,
}

/// A pool's figures, as `devmm info` shows them.
#[derive(Debug, Serialize)]
struct PoolEntry {
    /// The link of the chain that owns the pool.
    resource: String,
    reserved_bytes: u64,
    reserved_high_bytes: u64,
    used_bytes: u64,
    used_high_bytes: u64,
    /// Reserved minus used: what the pool holds that no block uses.
    fragmentation_bytes: u64,
}

/// The figures of the first link of `mr`'s chain with a pool of its own.
fn pool_of(mr: &dyn devmm::MemoryResource) -> Option<devmm::Result<PoolEntry>> {
    let (link, figures) = devmm::pool_of_chain(mr)?;
    Some(figures.map(|s| PoolEntry {
        resource: format!("{link:?}"),
        reserved_bytes: s.reserved_bytes,
        reserved_high_bytes: s.reserved_high_bytes,
        used_bytes: s.used_bytes,
        used_high_bytes: s.used_high_bytes,
        fragmentation_bytes: s.fragmentation_bytes(),
    }))
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
                    library: None,
                    runtime_version: None,
                    driver_version: None,
                    discovery: Vec::new(),
                    pinned_memory: None,
                });
                continue;
            }
        };
        let (versions, versions_error) = match rt.library_versions() {
            Ok(versions) => (versions, None),
            Err(e) => (None, Some(format!("cannot read versions: {e}"))),
        };
        let (runtime_version, driver_version) = match versions {
            Some(v) => (Some(v.runtime), v.driver),
            None => (None, None),
        };
        match rt.devices() {
            Ok(list) => {
                let (pinned_memory, reason) = match pinned_of(&*rt) {
                    Some(Ok(entry)) => (Some(entry), versions_error),
                    Some(Err(e)) => (
                        None,
                        Some(versions_error.map_or(e.clone(), |v| format!("{v}; {e}"))),
                    ),
                    None => (None, versions_error),
                };
                runtimes.push(RuntimeEntry {
                    name: found.name.clone(),
                    available: true,
                    devices: Some(list.len()),
                    reason,
                    library: rt.library_file(),
                    runtime_version,
                    driver_version,
                    discovery: rt.library_discovery().to_vec(),
                    pinned_memory,
                });
                devices.extend(list.into_iter().map(|device| {
                    let mut errors = Vec::new();
                    let memory = rt
                        .memory_info(device)
                        .map_err(|e| errors.push(format!("memory: {e}")))
                        .ok();
                    let description = rt
                        .describe(device)
                        .map_err(|e| errors.push(format!("description: {e}")))
                        .unwrap_or_default();
                    let current = devmm::get_current_memory_resource(device)
                        .map_err(|e| errors.push(format!("resource: {e}")))
                        .ok();
                    let chain = current.as_ref().map(|mr| devmm::resource_chain(&**mr));
                    let pool = current
                        .as_ref()
                        .and_then(|mr| pool_of(&**mr))
                        .and_then(|pool| pool.map_err(|e| errors.push(format!("pool: {e}"))).ok());
                    DeviceEntry {
                        device: device.to_string(),
                        runtime: found.name.clone(),
                        name: description.name,
                        compute_capability: description
                            .compute_capability
                            .map(|(major, minor)| format!("{major}.{minor}")),
                        pci_bus_id: description.pci_bus_id,
                        memory_pools: description.memory_pools,
                        used_bytes: memory.map(|m| m.total.saturating_sub(m.free)),
                        free_bytes: memory.map(|m| m.free),
                        total_bytes: memory.map(|m| m.total),
                        resource_chain: chain,
                        pool,
                        errors,
                    }
                }));
            }
            Err(e) => runtimes.push(RuntimeEntry {
                name: found.name,
                available: true,
                devices: None,
                reason: Some(format!("cannot list devices: {e}")),
                library: rt.library_file(),
                runtime_version,
                driver_version,
                discovery: rt.library_discovery().to_vec(),
                pinned_memory: None,
            }),
        }
    }
    InfoReport { runtimes, devices }
}

/// The DETAIL column: the reason, then the libraries passed over, if any.
fn detail(rt: &RuntimeEntry) -> String {
    let mut parts: Vec<String> = rt.reason.iter().cloned().collect();
    if rt.discovery.len() > 1 {
        parts.push(format!("tried {}", rt.discovery.join(", ")));
    }
    parts.join("; ")
}

impl Report for InfoReport {
    fn to_text(&self) -> String {
        let mut runtimes = Table::new(&[
            ("RUNTIME", Align::Left),
            ("STATUS", Align::Left),
            ("DEVICES", Align::Right),
            ("RUNTIME LIB", Align::Left),
            ("DRIVER", Align::Left),
            ("DETAIL", Align::Left),
        ]);
        for rt in &self.runtimes {
            runtimes.row(vec![
                rt.name.clone(),
                if rt.available { "available" } else { "missing" }.to_owned(),
                rt.devices.map(|n| n.to_string()).unwrap_or_default(),
                rt.runtime_version.clone().unwrap_or_default(),
                rt.driver_version.clone().unwrap_or_default(),
                detail(rt),
            ]);
        }
        let mut devices = Table::new(&[
            ("DEVICE", Align::Left),
            ("RUNTIME", Align::Left),
            ("NAME", Align::Left),
            ("CC", Align::Left),
            ("PCI BUS ID", Align::Left),
            ("POOLS", Align::Left),
            ("USED", Align::Right),
            ("FREE", Align::Right),
            ("TOTAL", Align::Right),
            ("RESOURCE CHAIN", Align::Left),
        ]);
        let unknown = || "?".to_owned();
        let blank = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".to_owned());
        for d in &self.devices {
            devices.row(vec![
                d.device.clone(),
                d.runtime.clone(),
                blank(&d.name),
                blank(&d.compute_capability),
                blank(&d.pci_bus_id),
                match d.memory_pools {
                    Some(true) => "yes",
                    Some(false) => "no",
                    None => "-",
                }
                .to_owned(),
                d.used_bytes.map_or_else(unknown, units::bytes),
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
        let mut pools = Table::new(&[
            ("DEVICE", Align::Left),
            ("RESERVED", Align::Right),
            ("USED", Align::Right),
            ("FRAGMENTATION", Align::Right),
            ("RESERVED HIGH", Align::Right),
            ("USED HIGH", Align::Right),
            ("POOL OF", Align::Left),
        ]);
        let with_pools: Vec<_> = self
            .devices
            .iter()
            .filter_map(|d| d.pool.as_ref().map(|pool| (d, pool)))
            .collect();
        for (d, pool) in &with_pools {
            let bytes = |n: u64| units::bytes(usize::try_from(n).unwrap_or(usize::MAX));
            pools.row(vec![
                d.device.clone(),
                bytes(pool.reserved_bytes),
                bytes(pool.used_bytes),
                bytes(pool.fragmentation_bytes),
                bytes(pool.reserved_high_bytes),
                bytes(pool.used_high_bytes),
                pool.resource.clone(),
            ]);
        }
        if !with_pools.is_empty() {
            text.push_str(&format!("\nPools\n\n{}", pools.render()));
        }
        let mut pinned = Table::new(&[
            ("DEVICE", Align::Left),
            ("SOURCE", Align::Left),
            ("RESOURCE", Align::Left),
        ]);
        let pinned_rows: Vec<_> = self
            .runtimes
            .iter()
            .filter_map(|rt| rt.pinned_memory.as_ref())
            .collect();
        for entry in &pinned_rows {
            pinned.row(vec![
                entry.device.clone(),
                if entry.host_pool {
                    "stream-ordered host pool"
                } else {
                    "page-locked allocator"
                }
                .to_owned(),
                entry.resource.clone(),
            ]);
        }
        if !pinned_rows.is_empty() {
            text.push_str(&format!("\nPinned memory\n\n{}", pinned.render()));
        }
        for d in &self.devices {
            for e in &d.errors {
                text.push_str(&format!("{}: {e}\n", d.device));
            }
        }
        text
    }
}
