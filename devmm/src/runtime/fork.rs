//! Which process a driver library was started in. A GPU runtime belongs to
//! the process that initialised it: fork() copies none of its driver state
//! or threads, and the CUDA guidelines make any use in the child undefined
//! (on hardware, errors or a hang). So every driver call devmm makes for a
//! device first asks [`Owner::check`], and a forked child gets
//! [`Error::ForkedAfterStart`] before the driver is reached.
//!
//! A child-side `pthread_atfork` handler counts forks; an owner remembers
//! the count when it started, so the check is one atomic load.

use std::sync::Once;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::device::Device;
use crate::error::{Error, Result};

/// Forks this process has been through, counted in each child.
static FORKS: AtomicU64 = AtomicU64::new(0);

extern "C" fn count_fork_in_child() {
    // An atomic add is async-signal-safe, as an at-fork child handler must be.
    FORKS.fetch_add(1, Ordering::Relaxed);
}

/// The process a driver library was started in.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Owner {
    forks: u64,
    pid: u32,
}

impl Owner {
    /// This process, from now on.
    pub(crate) fn here() -> Owner {
        static REGISTER: Once = Once::new();
        REGISTER.call_once(|| {
            // SAFETY: the handler only adds to an atomic, which is sound in
            // a child forked from a multithreaded process.
            let status = unsafe { libc::pthread_atfork(None, None, Some(count_fork_in_child)) };
            if status != 0 {
                tracing::warn!(target: "devmm::runtime", status, "could not register the at-fork handler; a forked child will not be told it cannot use the GPU runtime");
            }
        });
        Owner {
            forks: FORKS.load(Ordering::Relaxed),
            pid: std::process::id(),
        }
    }

    /// Whether this process was forked from the owner.
    pub(crate) fn is_forked(self) -> bool {
        FORKS.load(Ordering::Relaxed) != self.forks
    }

    /// Refuses a call for `device` through `runtime` in a forked child.
    pub(crate) fn check(self, runtime: &str, device: Device) -> Result<()> {
        if !self.is_forked() {
            return Ok(());
        }
        Err(Error::ForkedAfterStart {
            runtime: runtime.to_owned(),
            device,
            parent: self.pid,
            child: std::process::id(),
        })
    }
}
