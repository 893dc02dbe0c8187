//! Memory pools made with `*MemPoolCreate`: what each has reserved from its device and how much
//! of that its blocks use, with the reference's rules.
//!
//! - A pool reserves device memory in [`CHUNK`]s when its unused reserve cannot hold a request,
//!   never past its maximum size (out of memory) or its device's limit (out of memory); the
//!   reserve is charged to the device, the blocks inside it are not charged again. A pool of
//!   pinned host memory charges no device and stops at the host's [`HOST_MEMORY`]; devices
//!   reach its blocks only once `*MemPoolSetAccess` gave them access.
//! - A block's bytes stop counting as used when its free is reached on its stream.
//! - At every synchronization the pool hands unused chunks back down to its release threshold
//!   (0 by default, so everything unused); `*MemPoolTrimTo` does the same down to its argument.
//! - A pool destroyed while blocks from it are still live is gone for the API at once, and its
//!   reserve goes back to the device when its last block is freed.

use std::ffi::c_int;

use crate::device::Devices;
use crate::handle::Handles;
use crate::platform::Fault;

/// What a pool reserves at a time: the 2 MiB granularity of the CUDA and HIP pools.
pub(crate) const CHUNK: u64 = 2 << 20;

/// The pinned memory the fake's host has for its host pools (1 TiB): a request past it is out of
/// memory, as a real host runs out.
pub(crate) const HOST_MEMORY: u64 = 1 << 40;

/// `cudaMemPoolAttr` / `hipMemPoolAttr`, in the order of the enumeration (1-based).
pub(crate) mod attr {
    use std::ffi::c_int;
    /// `ReuseFollowEventDependencies`, `ReuseAllowOpportunistic`,
    /// `ReuseAllowInternalDependencies`: `int` flags, all on by default.
    pub(crate) const REUSE: [c_int; 3] = [1, 2, 3];
    pub(crate) const RELEASE_THRESHOLD: c_int = 4;
    pub(crate) const RESERVED_CURRENT: c_int = 5;
    pub(crate) const RESERVED_HIGH: c_int = 6;
    pub(crate) const USED_CURRENT: c_int = 7;
    pub(crate) const USED_HIGH: c_int = 8;
}

#[derive(Debug)]
pub(crate) struct Pool {
    pub(crate) device: c_int,
    reserved: u64,
    reserved_high: u64,
    used: u64,
    used_high: u64,
    release_threshold: u64,
    /// 0: only the device's limit bounds the pool.
    max_size: u64,
    /// HIP's marks and limit (`Platform::high_water_marks_zeroed`).
    pub(crate) marks_zeroed: bool,
    reuse: [bool; 3],
    /// Destroyed with blocks still live: invisible to the API, kept for their frees.
    destroyed: bool,
    /// A pool of pinned host memory (a host location): its reserve is charged to no device.
    pub(crate) host: bool,
    /// The devices `*MemPoolSetAccess` gave read-write access to a host pool's memory: "their
    /// default accessibility will be from the host CPU" (`cudaMemPoolCreate`), so a device
    /// copies its blocks only once it is here.
    pub(crate) device_access: Vec<c_int>,
    /// The file an IPC-capable pool keeps its blocks in, or the one an imported pool maps
    /// them from (see `crate::ipc`).
    pub(crate) link: Option<crate::ipc::Link>,
}

impl Pool {
    pub(crate) fn new(device: c_int, max_size: u64) -> Pool {
        Pool {
            device,
            reserved: 0,
            reserved_high: 0,
            used: 0,
            used_high: 0,
            release_threshold: 0,
            max_size,
            marks_zeroed: false,
            reuse: [true; 3],
            destroyed: false,
            host: false,
            device_access: Vec::new(),
            link: None,
        }
    }

    /// Hands unused chunks back to the device until `keep` bytes (or what the blocks use,
    /// rounded up to whole chunks, whichever is more) stay reserved.
    fn trim(&mut self, device: &mut Devices, keep: u64) {
        let in_use = self.used.div_ceil(CHUNK).saturating_mul(CHUNK);
        let target = keep.max(in_use).min(self.reserved);
        let freed = self.reserved - target;
        self.reserved = target;
        if !self.host {
            device.release(self.device, usize::try_from(freed).unwrap_or(usize::MAX));
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct Pools {
    pools: Handles<Pool>,
}

impl Pools {
    pub(crate) fn create(&mut self, pool: Pool) -> usize {
        self.pools.insert(pool)
    }

    /// The pool `handle` names, destroyed ones included (their live blocks still come from it).
    pub(crate) fn get(&self, handle: usize) -> Option<&Pool> {
        self.pools.get(handle).ok()
    }

    /// A pool the API may use: a destroyed one is a dead handle.
    pub(crate) fn get_mut(&mut self, handle: usize) -> Result<&mut Pool, Fault> {
        match self.pools.get_mut(handle)? {
            pool if pool.destroyed => Err(Fault::DeadHandle),
            pool => Ok(pool),
        }
    }

    /// Pools in the table, destroyed ones still holding blocks included.
    pub(crate) fn count(&self) -> usize {
        self.pools.values().count()
    }

    /// Takes `size` bytes for a block, growing the reserve by whole chunks when the unused part
    /// cannot hold them.
    pub(crate) fn take(
        &mut self,
        handle: usize,
        devices: &mut Devices,
        size: u64,
    ) -> Result<(), Fault> {
        let pool = self.get_mut(handle)?;
        let used = pool.used.checked_add(size).ok_or(Fault::OutOfMemory)?;
        if used > pool.reserved {
            let needed = used - pool.reserved;
            let mut grow = needed.div_ceil(CHUNK).saturating_mul(CHUNK);
            if pool.max_size != 0 && pool.marks_zeroed {
                // HIP: the request against the high-water mark, which a reset zeroed.
                if pool.reserved_high.saturating_add(size) > pool.max_size {
                    return Err(Fault::OutOfMemory);
                }
                grow = grow.min(pool.max_size.saturating_sub(pool.reserved).max(needed));
            } else if pool.max_size != 0 {
                let room = pool.max_size.saturating_sub(pool.reserved);
                if room < needed {
                    return Err(Fault::OutOfMemory);
                }
                grow = grow.min(room);
            }
            let reserved = pool
                .reserved
                .checked_add(grow)
                .filter(|&reserved| !pool.host || reserved <= HOST_MEMORY)
                .ok_or(Fault::OutOfMemory)?;
            if !pool.host {
                devices.reserve(
                    pool.device,
                    usize::try_from(grow).map_err(|_| Fault::OutOfMemory)?,
                )?;
            }
            pool.reserved = reserved;
            pool.reserved_high = pool.reserved_high.max(pool.reserved);
        }
        pool.used = used;
        pool.used_high = pool.used_high.max(used);
        Ok(())
    }

    /// A block's free was reached: its bytes are unused. The last block of a destroyed pool
    /// takes the pool's reserve back to the device.
    pub(crate) fn give_back(&mut self, handle: usize, devices: &mut Devices, size: u64) {
        let Ok(pool) = self.pools.get_mut(handle) else {
            return;
        };
        pool.used = pool.used.saturating_sub(size);
        if pool.destroyed && pool.used == 0 {
            pool.trim(devices, 0);
            let _ = self.pools.remove(handle);
        }
    }

    /// `*MemPoolDestroy`: at once when no block is live, else when the last one is freed.
    pub(crate) fn destroy(&mut self, handle: usize, devices: &mut Devices) -> Result<(), Fault> {
        let pool = self.get_mut(handle)?;
        if pool.used == 0 {
            pool.trim(devices, 0);
            self.pools.remove(handle)?;
        } else {
            pool.destroyed = true;
        }
        Ok(())
    }

    /// `*MemPoolTrimTo`.
    pub(crate) fn trim(
        &mut self,
        handle: usize,
        devices: &mut Devices,
        keep: u64,
    ) -> Result<(), Fault> {
        self.get_mut(handle)?.trim(devices, keep);
        Ok(())
    }

    /// A synchronization: every pool hands back what it keeps beyond its release threshold.
    pub(crate) fn synchronized(&mut self, devices: &mut Devices) {
        for pool in self.pools.values_mut() {
            let keep = pool.release_threshold;
            pool.trim(devices, keep);
        }
    }

    /// `*MemPoolGetAttribute`: the value, as the `u64` or `int` the attribute has.
    pub(crate) fn attribute(&mut self, handle: usize, attr: c_int) -> Result<Value, Fault> {
        let pool = self.get_mut(handle)?;
        Ok(match attr {
            attr::RELEASE_THRESHOLD => Value::U64(pool.release_threshold),
            attr::RESERVED_CURRENT => Value::U64(pool.reserved),
            attr::RESERVED_HIGH => Value::U64(pool.reserved_high),
            attr::USED_CURRENT => Value::U64(pool.used),
            attr::USED_HIGH => Value::U64(pool.used_high),
            reuse => Value::Int(c_int::from(pool.reuse[reuse_index(reuse)?])),
        })
    }

    /// `*MemPoolSetAttribute`: the threshold and the reuse flags take any value; a high-water
    /// mark can only be reset by writing 0 (to the current figure; to 0 where the pool's marks
    /// are HIP's); the current figures are read-only.
    pub(crate) fn set_attribute(
        &mut self,
        handle: usize,
        attr: c_int,
        value: Value,
    ) -> Result<(), Fault> {
        let pool = self.get_mut(handle)?;
        match (attr, value) {
            (attr::RELEASE_THRESHOLD, Value::U64(bytes)) => pool.release_threshold = bytes,
            (attr::RESERVED_HIGH, Value::U64(0)) if pool.marks_zeroed => pool.reserved_high = 0,
            (attr::USED_HIGH, Value::U64(0)) if pool.marks_zeroed => pool.used_high = 0,
            (attr::RESERVED_HIGH, Value::U64(0)) => pool.reserved_high = pool.reserved,
            (attr::USED_HIGH, Value::U64(0)) => pool.used_high = pool.used,
            (reuse, Value::Int(on)) => pool.reuse[reuse_index(reuse)?] = on != 0,
            _ => return Err(Fault::InvalidValue),
        }
        Ok(())
    }
}

/// What an attribute holds: `cuuint64_t` for the threshold and the figures, `int` for the
/// reuse flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Value {
    U64(u64),
    Int(c_int),
}

/// Whether `attr` is a `u64` attribute (else an `int` one, or unknown).
pub(crate) fn is_u64(attr: c_int) -> bool {
    (attr::RELEASE_THRESHOLD..=attr::USED_HIGH).contains(&attr)
}

fn reuse_index(attr: c_int) -> Result<usize, Fault> {
    attr::REUSE
        .iter()
        .position(|&a| a == attr)
        .ok_or(Fault::InvalidValue)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn reserve_grows_in_chunks_and_is_released_down_to_the_threshold() {
        let mut devices = Devices::default();
        let mut pools = Pools::default();
        let pool = pools.create(Pool::new(0, 0));
        pools.take(pool, &mut devices, MIB).unwrap();
        assert_eq!(
            pools.attribute(pool, attr::RESERVED_CURRENT),
            Ok(Value::U64(CHUNK))
        );
        assert_eq!(devices.info(0).unwrap().0, (1 << 30) - CHUNK);
        pools.give_back(pool, &mut devices, MIB);
        assert_eq!(pools.attribute(pool, attr::USED_CURRENT), Ok(Value::U64(0)));
        assert_eq!(pools.attribute(pool, attr::USED_HIGH), Ok(Value::U64(MIB)));
        pools.synchronized(&mut devices);
        assert_eq!(
            pools.attribute(pool, attr::RESERVED_CURRENT),
            Ok(Value::U64(0))
        );
        assert_eq!(devices.info(0).unwrap().0, 1 << 30);
    }

    #[test]
    fn a_host_pool_refuses_more_than_the_host_has() {
        let mut devices = Devices::default();
        let mut pools = Pools::default();
        let mut host = Pool::new(0, 0);
        host.host = true;
        let pool = pools.create(host);
        pools.take(pool, &mut devices, MIB).unwrap();
        // Asked for more than any host has, with a chunk already reserved:
        // refused, as the driver refuses it, not an overflow.
        for size in [u64::MAX, u64::MAX / 2 + 1, HOST_MEMORY] {
            assert_eq!(
                pools.take(pool, &mut devices, size),
                Err(Fault::OutOfMemory)
            );
        }
        assert_eq!(
            pools.attribute(pool, attr::RESERVED_CURRENT),
            Ok(Value::U64(CHUNK))
        );
        let mut fresh = Pool::new(0, 0);
        fresh.host = true;
        let fresh = pools.create(fresh);
        assert_eq!(
            pools.take(fresh, &mut devices, u64::MAX),
            Err(Fault::OutOfMemory)
        );
        // The device's memory is untouched: a host pool charges none.
        assert_eq!(devices.info(0).unwrap().0, 1 << 30);
    }

    #[test]
    fn max_size_refuses_and_destroy_waits_for_the_last_block() {
        let mut devices = Devices::default();
        let mut pools = Pools::default();
        let pool = pools.create(Pool::new(1, 3 * MIB));
        pools.take(pool, &mut devices, 3 * MIB).unwrap();
        assert_eq!(pools.take(pool, &mut devices, 1), Err(Fault::OutOfMemory));
        pools.destroy(pool, &mut devices).unwrap();
        assert_eq!(pools.get_mut(pool).err(), Some(Fault::DeadHandle));
        assert_eq!(pools.count(), 1);
        pools.give_back(pool, &mut devices, 3 * MIB);
        assert_eq!(pools.count(), 0);
        assert_eq!(devices.info(1).unwrap().0, 1 << 30);
    }

    #[test]
    fn high_water_marks_reset_only_to_the_current_figure() {
        let mut devices = Devices::default();
        let mut pools = Pools::default();
        let pool = pools.create(Pool::new(0, 0));
        pools.take(pool, &mut devices, 5 * MIB).unwrap();
        pools.give_back(pool, &mut devices, 5 * MIB);
        assert_eq!(
            pools.set_attribute(pool, attr::USED_HIGH, Value::U64(7)),
            Err(Fault::InvalidValue)
        );
        assert_eq!(
            pools.set_attribute(pool, attr::USED_CURRENT, Value::U64(0)),
            Err(Fault::InvalidValue)
        );
        pools
            .set_attribute(pool, attr::USED_HIGH, Value::U64(0))
            .unwrap();
        assert_eq!(pools.attribute(pool, attr::USED_HIGH), Ok(Value::U64(0)));
        assert_eq!(
            pools.attribute(pool, attr::RESERVED_HIGH),
            Ok(Value::U64(6 * MIB))
        );
    }

    #[test]
    fn hip_zeroes_marks_and_bounds_the_high_water_mark() {
        let mut devices = Devices::default();
        let mut pools = Pools::default();
        let mut hip = Pool::new(0, 4 * MIB);
        hip.marks_zeroed = true;
        let pool = pools.create(hip);
        pools.take(pool, &mut devices, 4 * MIB).unwrap();
        assert_eq!(pools.take(pool, &mut devices, 1), Err(Fault::OutOfMemory));
        // A reset mark is 0, below the reserve of 4 MiB...
        for mark in [attr::RESERVED_HIGH, attr::USED_HIGH] {
            pools.set_attribute(pool, mark, Value::U64(0)).unwrap();
            assert_eq!(pools.attribute(pool, mark), Ok(Value::U64(0)));
        }
        // ...and the limit is checked against it: the pool grows past 4 MiB.
        pools.take(pool, &mut devices, MIB).unwrap();
        assert_eq!(
            pools.attribute(pool, attr::RESERVED_CURRENT),
            Ok(Value::U64(5 * MIB))
        );
    }
}
