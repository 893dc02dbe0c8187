//! Running a check in a child forked from the test process.
//!
//! The test harness runs tests on threads; a forked child has only the
//! forking thread, so the checks it runs must not wait on a lock another
//! thread may have held at the fork (tests using a fake hold
//! [`exclusive()`](super::fake_driver::exclusive), and the fake's stream
//! threads are idle after a reset or a synchronize). The child ends with
//! `_exit`: the parent's destructors and exit handlers (a GPU runtime's
//! among them) are not the child's to run.

// Each test binary uses a different part of the support module.
#![allow(dead_code)]

use std::fs::File;
use std::io::Read;
use std::os::fd::FromRawFd;
use std::panic::{self, AssertUnwindSafe};

/// Runs `check` in a forked child and returns `Ok(())` when it returned,
/// or its panic message (with the exit status) when it did not.
pub(crate) fn in_forked_child(check: impl FnOnce()) -> Result<(), String> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is valid for the two descriptors `pipe` writes.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe failed");
    let [read_end, write_end] = fds;
    // SAFETY: the child runs `check` on this thread only, then `_exit`s.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // The panic message goes to the parent through the pipe, not to
        // the harness's captured output, which the child cannot flush.
        panic::set_hook(Box::new(|_| {}));
        let outcome = panic::catch_unwind(AssertUnwindSafe(check));
        let message = match &outcome {
            Ok(()) => String::new(),
            Err(payload) => payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "the child panicked".to_owned()),
        };
        // SAFETY: `message` is valid for its length; `_exit` ends the child
        // without running the parent's exit handlers.
        unsafe {
            libc::write(write_end, message.as_ptr().cast(), message.len());
            libc::_exit(i32::from(outcome.is_err()));
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
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        Ok(())
    } else {
        Err(format!("{message} (wait status {status})"))
    }
}
