//! Running a check in a child forked from the test process.
//!
//! The test harness runs tests on threads; a forked child has only the
//! forking thread, so the checks it runs must not wait on a lock another
//! thread may have held at the fork (tests using a fake hold
//! [`exclusive()`](super::fake_driver::exclusive), and the fake's stream
//! threads are idle after a reset or a synchronize). The child reports
//! through a pipe, then kills itself with `SIGKILL`: nothing at exit runs
//! there, neither the parent's destructors and exit handlers (a GPU
//! runtime's among them: not the child's to run) nor a tool's exit-time
//! check (valgrind's leak check would count the harness's threads, which
//! the child does not have, as leaks).

// Each test binary uses a different part of the support module.
#![allow(dead_code)]

use std::fs::File;
use std::io::Read;
use std::os::fd::FromRawFd;
use std::panic::{self, AssertUnwindSafe};

/// What the child writes when `check` returned.
const PASSED: &str = "passed";

/// Runs `check` in a forked child and returns `Ok(())` when it returned,
/// or its panic message (with the wait status) when it did not.
pub(crate) fn in_forked_child(check: impl FnOnce()) -> Result<(), String> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is valid for the two descriptors `pipe` writes.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe failed");
    let [read_end, write_end] = fds;
    // SAFETY: the child runs `check` on this thread only, then kills itself.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // The panic message goes to the parent through the pipe, not to
        // the harness's captured output, which the child cannot flush.
        panic::set_hook(Box::new(|_| {}));
        let message = match panic::catch_unwind(AssertUnwindSafe(check)) {
            Ok(()) => PASSED.to_owned(),
            Err(payload) => payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "the child panicked".to_owned()),
        };
        // SAFETY: `message` is valid for its length; SIGKILL ends the child
        // with nothing run at exit.
        unsafe {
            libc::write(write_end, message.as_ptr().cast(), message.len());
            libc::close(write_end);
            libc::raise(libc::SIGKILL);
            libc::_exit(1);
        }
    }
    // SAFETY: the parent's copy of the write end, closed once.
    unsafe { libc::close(write_end) };
    // SAFETY: the read end is this process's and owned by the `File` only.
    let mut pipe = unsafe { File::from_raw_fd(read_end) };
    let mut message = String::new();
    pipe.read_to_string(&mut message)
        .expect("the child's report reads");
    let mut status = 0;
    // SAFETY: `pid` is this process's child; `status` is valid for a write.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    if message == PASSED {
        Ok(())
    } else {
        Err(format!("{message} (wait status {status})"))
    }
}
