//! Failure injection: make the n-th next call of a function return a chosen status.

use std::ffi::c_int;

#[derive(Debug)]
struct Injection {
    name: String,
    /// Calls of `name` still to come before this one fails (1: the very next call).
    countdown: u64,
    status: c_int,
}

#[derive(Debug, Default)]
pub(crate) struct Injections {
    pending: Vec<Injection>,
}

impl Injections {
    /// Arms a failure of the `nth` (1-based) next call of `name`.
    pub(crate) fn arm(&mut self, name: String, nth: u64, status: c_int) {
        self.pending.push(Injection {
            name,
            countdown: nth,
            status,
        });
    }

    /// Called once per call of `name`: advances its injections and returns the status of the
    /// first one due. Only one fires per call; others due at the same time fire on the following
    /// calls, so arming "the next call" twice fails the next two calls.
    pub(crate) fn take(&mut self, name: &str) -> Option<c_int> {
        let mut first_due = None;
        for (index, injection) in self.pending.iter_mut().enumerate() {
            if injection.name == name {
                injection.countdown = injection.countdown.saturating_sub(1);
                if injection.countdown == 0 && first_due.is_none() {
                    first_due = Some(index);
                }
            }
        }
        first_due.map(|index| self.pending.remove(index).status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nth_call_fails_once() {
        let mut injections = Injections::default();
        injections.arm("cudaMalloc".into(), 2, 2);
        assert_eq!(injections.take("cudaFree"), None);
        assert_eq!(injections.take("cudaMalloc"), None);
        assert_eq!(injections.take("cudaMalloc"), Some(2));
        assert_eq!(injections.take("cudaMalloc"), None);
    }

    #[test]
    fn queued_failures_fire_one_per_call() {
        let mut injections = Injections::default();
        injections.arm("hipMalloc".into(), 1, 2);
        injections.arm("hipMalloc".into(), 1, 101);
        assert_eq!(injections.take("hipMalloc"), Some(2));
        assert_eq!(injections.take("hipMalloc"), Some(101));
        assert_eq!(injections.take("hipMalloc"), None);
    }
}
