//! One driver call: counted, checked against injected failures, run under the state lock with
//! panics caught, and logged as `name key=value ... -> status`.

use std::ffi::c_int;
use std::fmt::{Display, Write};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crate::platform::{Fault, Platform};
use crate::state::{self, State};

/// Runs `body`, aborting the process if it panics: no panic may unwind into C, and a panic is a
/// fault in the model, not an answer of the driver's. Turned into an error status, it let a test
/// pass through it (a host pool's reserve overflowed and the conformance suite took the panic for
/// the out-of-memory error it expected).
pub(crate) fn guarded<T>(body: impl FnOnce() -> T) -> T {
    panic::catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|_| {
        eprintln!("fake driver: a call panicked (the message is above); aborting");
        std::process::abort()
    })
}

/// Calls to slow down once each (`fake_delay_next_call`): the name and the microseconds.
static DELAYED: Mutex<Vec<(String, u64)>> = Mutex::new(Vec::new());

/// Calls sleeping in [`delay_if_armed`] now.
static SLEEPING: AtomicU64 = AtomicU64::new(0);

/// Makes the next call of `name` sleep `micros` before it runs, outside the state lock, so
/// that other threads' calls go on meanwhile: a test holds a thread inside one driver call.
pub(crate) fn delay_next(name: String, micros: u64) {
    DELAYED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((name, micros));
}

/// How many calls are sleeping in their delay now.
pub(crate) fn sleeping() -> u64 {
    SLEEPING.load(Ordering::SeqCst)
}

/// Forgets every armed delay (`fake_reset`).
pub(crate) fn clear_delays() {
    DELAYED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
}

/// Sleeps the delay armed for `name`, if any, taking it.
fn delay_if_armed(name: &str) {
    let micros = {
        let mut delayed = DELAYED.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(index) = delayed.iter().position(|(n, _)| n == name) else {
            return;
        };
        delayed.remove(index).1
    };
    SLEEPING.fetch_add(1, Ordering::SeqCst);
    std::thread::sleep(Duration::from_micros(micros));
    SLEEPING.fetch_sub(1, Ordering::SeqCst);
}

/// The arguments of a call being logged; outputs are appended by the call's body.
#[derive(Debug)]
pub(crate) struct Args(String);

impl Args {
    /// Appends ` key=value`.
    pub(crate) fn note(&mut self, key: &str, value: impl Display) {
        // Writing into a String cannot fail.
        let _ = write!(self.0, " {key}={value}");
    }

    /// Appends ` key=0x...`, the form handles and pointers take in the log.
    pub(crate) fn note_hex(&mut self, key: &str, value: usize) {
        self.note(key, format_args!("{value:#x}"));
    }
}

#[derive(Debug)]
pub(crate) struct Call {
    platform: &'static Platform,
    name: &'static str,
    args: Args,
}

impl Call {
    pub(crate) fn new(platform: &'static Platform, name: &'static str) -> Self {
        Self {
            platform,
            name,
            args: Args(String::new()),
        }
    }

    /// Logs an input argument (inputs are logged even when an injected failure skips the body).
    pub(crate) fn arg(mut self, key: &str, value: impl Display) -> Self {
        self.args.note(key, value);
        self
    }

    /// Logs a handle or pointer argument in hex.
    pub(crate) fn arg_hex(mut self, key: &str, value: usize) -> Self {
        self.args.note_hex(key, value);
        self
    }

    /// Runs a status-returning call and returns the platform's status code.
    pub(crate) fn run(
        self,
        body: impl FnOnce(&mut State, &mut Args) -> Result<(), Fault>,
    ) -> c_int {
        let Call {
            platform,
            name,
            mut args,
        } = self;
        guarded(move || {
            delay_if_armed(name);
            let mut state = state::lock();
            state.log.count(name);
            // The first call initialises the runtime for this process; fork() copies none of
            // its state to a child (which then gets the initialisation error), so a child
            // touches nothing of the parent's.
            let here = std::process::id();
            let forked = *state.owner.get_or_insert(here) != here;
            let outcome = match state.injections.take(name) {
                _ if forked => Err(Fault::NotInitialized),
                Some(status) => Err(Fault::Injected(status)),
                None if state.mode.no_driver => Err(Fault::InsufficientDriver),
                None => body(&mut state, &mut args),
            };
            let code = platform.code(outcome);
            state.log.push(format!("{name}{} -> {code}", args.0));
            if outcome == Err(Fault::DeadHandle) && state.mode.strict {
                // What the real runtime's undefined behaviour may do; a test sees the abort.
                eprintln!(
                    "fake driver (strict): {name}{} was given a handle that was never created or was destroyed; aborting",
                    args.0
                );
                std::process::abort();
            }
            if code != platform.codes.success {
                // As the runtime does: the error stays until `*GetLastError` reads it.
                state.last_error.insert(std::thread::current().id(), code);
            }
            code
        })
    }

    /// `*GetLastError` (`clear`) and `*PeekAtLastError`: the calling thread's last error, which
    /// is their status; reading it never sets it.
    pub(crate) fn last_error(self, clear: bool) -> c_int {
        let Call { platform, name, .. } = self;
        guarded(move || {
            let mut state = state::lock();
            state.log.count(name);
            let thread = std::thread::current().id();
            let code = if clear {
                state.last_error.remove(&thread)
            } else {
                state.last_error.get(&thread).copied()
            }
            .unwrap_or(platform.codes.success);
            state.log.push(format!("{name} -> {code}"));
            code
        })
    }

    /// Counts and logs a call that returns no status (the error-name functions): nothing to
    /// fail, so injected failures do not apply.
    pub(crate) fn record(self) {
        let Call { name, args, .. } = self;
        guarded(move || {
            let mut state = state::lock();
            state.log.count(name);
            state.log.push(format!("{name}{}", args.0));
        });
    }
}
