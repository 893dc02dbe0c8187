//! The memory pool a resource made or imported, destroyed when it drops:
//! what the pool resource (`pool`), pinned host memory (`memory`) and IPC
//! imports (`ipc`) hold, kept below all three so none needs another for it.

use std::sync::Arc;

use crate::device::Device;
use crate::runtime::driver::Driver;

use super::{Platform, result};

/// The pool a resource made, destroyed when the resource drops: the driver
/// gives its memory back once the blocks still live in it are freed.
pub(super) struct OwnedPool<P: Platform> {
    pub(super) driver: Arc<Driver<P>>,
    pub(super) device: Device,
    /// The pool's native handle.
    pub(super) handle: usize,
}

impl<P: Platform> OwnedPool<P> {
    /// Takes ownership of `handle`, a pool created or imported on `device`.
    pub(super) fn new(driver: Arc<Driver<P>>, device: Device, handle: usize) -> Self {
        OwnedPool {
            driver,
            device,
            handle,
        }
    }
}

impl<P: Platform> Drop for OwnedPool<P> {
    fn drop(&mut self) {
        if self.driver.owner().is_forked() {
            // The pool is the parent's: a forked child leaves it alone.
            return;
        }
        if let Err(e) = result::pool::destroy(&self.driver, self.device, self.handle) {
            tracing::warn!(target: "devmm::runtime", error = %e, "could not destroy a memory pool");
        }
    }
}
