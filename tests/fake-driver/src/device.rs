//! Devices: how many there are, their memory limits and usage, and each thread's current device.

use std::cell::Cell;
use std::ffi::c_int;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::platform::Fault;

/// Devices a fresh (or reset) fake reports.
pub(crate) const DEFAULT_DEVICE_COUNT: usize = 2;
/// Memory limit of each device until `fake_set_memory_limit` changes it: 1 GiB.
pub(crate) const DEFAULT_MEMORY_LIMIT: u64 = 1 << 30;
/// Most devices `fake_set_device_count` accepts; real machines have far fewer.
pub(crate) const MAX_DEVICE_COUNT: usize = 64;
/// The host NUMA nodes of the fake machine (two sockets): 0 and 1.
pub(crate) const HOST_NUMA_NODES: c_int = 2;

/// Bumped for every fresh device table, so `fake_reset` sends every thread back to device 0.
static GENERATION: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// `(generation, device)`: the thread's current device, valid while `generation` is the
    /// table's. A const-initialised `Cell` registers no TLS destructor; a destructor would live
    /// in this library's code and crash threads exiting after the library is unloaded.
    static CURRENT: Cell<(u64, c_int)> = const { Cell::new((0, 0)) };
}

#[derive(Debug, Clone, Copy)]
struct DeviceMemory {
    limit: u64,
    used: u64,
    /// `cudaDevAttrMemoryPoolsSupported`: without pools, `*MallocAsync` is not supported.
    pools: bool,
    /// `cudaDevAttrUnifiedAddressing`: without it, `*MemcpyDefault` is an invalid direction.
    unified: bool,
    /// `cudaDevAttrConcurrentManagedAccess`: whether the host may touch managed memory while
    /// work runs on the device (on by default).
    concurrent_managed: bool,
    /// Whether a context (the primary one) was created on the device.
    context: bool,
    /// Which of the machine's GPUs this ordinal is (`FAKE_DRIVER_VISIBLE_DEVICES`): the
    /// identity that outlives a process's numbering, in its PCI bus id and its IPC exports.
    physical: c_int,
    /// `cudaDevAttrHostNumaId`: the host NUMA node closest to the device,
    /// -1 on a system without NUMA (`fake_set_host_numa_id`).
    host_numa: c_int,
}

impl Default for DeviceMemory {
    fn default() -> Self {
        Self {
            limit: DEFAULT_MEMORY_LIMIT,
            used: 0,
            pools: std::env::var_os("FAKE_DRIVER_NO_POOLS").is_none_or(|v| v != "1"),
            // Every 64-bit CUDA and ROCm system has it.
            unified: true,
            concurrent_managed: true,
            context: false,
            physical: 0,
            host_numa: 0,
        }
    }
}

#[derive(Debug)]
pub(crate) struct Devices {
    memory: Vec<DeviceMemory>,
    generation: u64,
}

impl Default for Devices {
    /// The machine's GPUs as `FAKE_DRIVER_VISIBLE_DEVICES` lists them, read as CUDA reads
    /// `CUDA_VISIBLE_DEVICES` (`"1,0"`: this process's device 0 is the machine's GPU 1): the
    /// list stops at the first entry that is not one of the machine's GPUs (of
    /// `DEFAULT_DEVICE_COUNT`) or repeats one, so `""` is no GPU; unset, every GPU in order.
    fn default() -> Self {
        let all = 0..DEFAULT_DEVICE_COUNT as c_int;
        let physical: Vec<c_int> = match std::env::var("FAKE_DRIVER_VISIBLE_DEVICES") {
            Ok(list) => {
                let mut seen = Vec::new();
                for gpu in list.split(',').map(|g| g.trim().parse::<c_int>()) {
                    match gpu {
                        Ok(gpu) if all.contains(&gpu) && !seen.contains(&gpu) => seen.push(gpu),
                        _ => break,
                    }
                }
                seen
            }
            Err(_) => all.collect(),
        };
        Self {
            memory: physical
                .into_iter()
                .take(MAX_DEVICE_COUNT)
                .map(|physical| DeviceMemory {
                    physical,
                    ..DeviceMemory::default()
                })
                .collect(),
            generation: GENERATION.fetch_add(1, Ordering::Relaxed),
        }
    }
}

impl Devices {
    pub(crate) fn count(&self) -> usize {
        self.memory.len()
    }

    /// Devices beyond the new count are dropped; allocations still live on them can be freed.
    pub(crate) fn set_count(&mut self, count: usize) -> Result<(), Fault> {
        if count > MAX_DEVICE_COUNT {
            return Err(Fault::InvalidValue);
        }
        let before = self.memory.len().min(count);
        self.memory.resize(count, DeviceMemory::default());
        // Devices added are the machine's next GPUs.
        let next = self.memory[..before]
            .iter()
            .map(|m| m.physical + 1)
            .max()
            .unwrap_or(0);
        for (extra, memory) in self.memory[before..].iter_mut().enumerate() {
            memory.physical = next + extra as c_int;
        }
        Ok(())
    }

    /// Which of the machine's GPUs `device` is.
    pub(crate) fn physical(&self, device: c_int) -> Result<c_int, Fault> {
        Ok(self.memory[self.index(device)?].physical)
    }

    /// This process's ordinal of the machine's GPU `physical`; a GPU this process does not
    /// see is an invalid device.
    pub(crate) fn local(&self, physical: c_int) -> Result<c_int, Fault> {
        let found = self.memory.iter().position(|m| m.physical == physical);
        found
            .and_then(|index| c_int::try_from(index).ok())
            .ok_or(Fault::InvalidDevice)
    }

    fn index(&self, device: c_int) -> Result<usize, Fault> {
        if self.memory.is_empty() {
            return Err(Fault::NoDevice);
        }
        usize::try_from(device)
            .ok()
            .filter(|&index| index < self.memory.len())
            .ok_or(Fault::InvalidDevice)
    }

    /// The calling thread's current device (0 until it calls `*SetDevice`).
    pub(crate) fn current(&self) -> Result<c_int, Fault> {
        let (generation, device) = CURRENT.get();
        let device = if generation == self.generation {
            device
        } else {
            0
        };
        self.index(device)?;
        Ok(device)
    }

    /// Makes `device` current; with `activates` (CUDA), as on hardware, this creates its
    /// primary context.
    pub(crate) fn set_current(&mut self, device: c_int, activates: bool) -> Result<(), Fault> {
        let index = self.index(device)?;
        self.memory[index].context |= activates;
        CURRENT.set((self.generation, device));
        Ok(())
    }

    /// The current device, for a call that needs a context on it (allocating, making a stream
    /// or an event): the context is created if the thread's device never had one.
    pub(crate) fn current_with_context(&mut self) -> Result<c_int, Fault> {
        let device = self.current()?;
        let index = self.index(device)?;
        self.memory[index].context = true;
        Ok(device)
    }

    /// How many devices have a context.
    pub(crate) fn contexts(&self) -> usize {
        self.memory.iter().filter(|m| m.context).count()
    }

    /// Whether `device` has a context.
    pub(crate) fn has_context(&self, device: c_int) -> Result<bool, Fault> {
        Ok(self.memory[self.index(device)?].context)
    }

    pub(crate) fn pools_supported(&self, device: c_int) -> Result<bool, Fault> {
        Ok(self.memory[self.index(device)?].pools)
    }

    pub(crate) fn set_pools_supported(&mut self, device: c_int, pools: bool) -> Result<(), Fault> {
        let index = self.index(device)?;
        self.memory[index].pools = pools;
        Ok(())
    }

    pub(crate) fn host_numa_id(&self, device: c_int) -> Result<c_int, Fault> {
        Ok(self.memory[self.index(device)?].host_numa)
    }

    /// `node` is a host NUMA node of the fake machine, or -1 for none.
    pub(crate) fn set_host_numa_id(&mut self, device: c_int, node: c_int) -> Result<(), Fault> {
        let index = self.index(device)?;
        if !(-1..HOST_NUMA_NODES).contains(&node) {
            return Err(Fault::InvalidValue);
        }
        self.memory[index].host_numa = node;
        Ok(())
    }

    pub(crate) fn unified_addressing(&self, device: c_int) -> Result<bool, Fault> {
        Ok(self.memory[self.index(device)?].unified)
    }

    pub(crate) fn set_unified_addressing(&mut self, device: c_int, on: bool) -> Result<(), Fault> {
        let index = self.index(device)?;
        self.memory[index].unified = on;
        Ok(())
    }

    pub(crate) fn concurrent_managed_access(&self, device: c_int) -> Result<bool, Fault> {
        Ok(self.memory[self.index(device)?].concurrent_managed)
    }

    pub(crate) fn set_concurrent_managed_access(
        &mut self,
        device: c_int,
        on: bool,
    ) -> Result<(), Fault> {
        let index = self.index(device)?;
        self.memory[index].concurrent_managed = on;
        Ok(())
    }

    pub(crate) fn set_limit(&mut self, device: c_int, bytes: u64) -> Result<(), Fault> {
        let index = self.index(device)?;
        self.memory[index].limit = bytes;
        Ok(())
    }

    /// `(free, total)`: the limit minus what live allocations on the device use.
    pub(crate) fn info(&self, device: c_int) -> Result<(u64, u64), Fault> {
        let memory = self.memory[self.index(device)?];
        Ok((memory.limit.saturating_sub(memory.used), memory.limit))
    }

    /// Charges `bytes` to the device, or fails with out-of-memory past its limit.
    pub(crate) fn reserve(&mut self, device: c_int, bytes: usize) -> Result<(), Fault> {
        let index = self.index(device)?;
        let memory = &mut self.memory[index];
        let used = u64::try_from(bytes)
            .ok()
            .and_then(|bytes| memory.used.checked_add(bytes))
            .filter(|&used| used <= memory.limit)
            .ok_or(Fault::OutOfMemory)?;
        memory.used = used;
        Ok(())
    }

    /// Returns what [`Devices::reserve`] charged; a device removed since is ignored.
    pub(crate) fn release(&mut self, device: c_int, bytes: usize) {
        let index = usize::try_from(device).ok();
        if let Some(memory) = index.and_then(|index| self.memory.get_mut(index)) {
            memory.used = memory.used.saturating_sub(bytes as u64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserve_stops_at_the_limit_and_release_gives_it_back() {
        let mut devices = Devices::default();
        devices.set_limit(1, 1000).unwrap();
        devices.reserve(1, 600).unwrap();
        assert_eq!(devices.reserve(1, 401), Err(Fault::OutOfMemory));
        assert_eq!(devices.info(1), Ok((400, 1000)));
        devices.release(1, 600);
        assert_eq!(devices.info(1), Ok((1000, 1000)));
    }

    #[test]
    fn a_fresh_table_sends_the_thread_back_to_device_0() {
        let mut devices = Devices::default();
        devices.set_current(1, true).unwrap();
        assert_eq!(devices.current(), Ok(1));
        assert_eq!(Devices::default().current(), Ok(0));
    }

    #[test]
    fn a_process_numbers_the_machines_gpus_its_own_way() {
        let mut devices = Devices::default();
        assert_eq!((devices.physical(0), devices.physical(1)), (Ok(0), Ok(1)));
        devices.set_count(3).unwrap();
        assert_eq!(devices.physical(2), Ok(2));
        // As `FAKE_DRIVER_VISIBLE_DEVICES=1` would: this process sees only GPU 1.
        devices.memory = vec![DeviceMemory {
            physical: 1,
            ..DeviceMemory::default()
        }];
        assert_eq!(devices.local(1), Ok(0));
        assert_eq!(devices.local(0), Err(Fault::InvalidDevice));
        devices.set_count(2).unwrap();
        assert_eq!(devices.physical(1), Ok(2), "the next GPU of the machine");
    }

    #[test]
    fn ordinals_are_checked_against_the_count() {
        let mut devices = Devices::default();
        assert_eq!(devices.set_current(2, true), Err(Fault::InvalidDevice));
        assert_eq!(devices.set_current(-1, true), Err(Fault::InvalidDevice));
        devices.set_current(1, true).unwrap();
        assert_eq!(devices.current(), Ok(1));
        devices.set_count(1).unwrap();
        assert_eq!(devices.current(), Err(Fault::InvalidDevice));
        devices.set_count(0).unwrap();
        assert_eq!(devices.current(), Err(Fault::NoDevice));
        assert_eq!(
            devices.set_count(MAX_DEVICE_COUNT + 1),
            Err(Fault::InvalidValue)
        );
    }
}
