//! Opaque handles for streams and events: distinct, non-zero, never reused.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::platform::Fault;

/// Handles start well above the sentinel streams (0, 1, 2) and step by 16 so they look like
/// pointers. One counter serves streams and events alike, so an event handle passed where a
/// stream is expected is an invalid handle rather than some other stream. It lives outside the
/// resettable state so a handle from before `fake_reset` can never become valid again.
static NEXT: AtomicUsize = AtomicUsize::new(0x1000);

/// Renders a handle as the opaque pointer type the C API uses (`cudaStream_t`, `hipEvent_t`...).
pub(crate) fn to_ptr(handle: usize) -> *mut c_void {
    std::ptr::without_provenance_mut(handle)
}

#[derive(Debug)]
pub(crate) struct Handles<T> {
    live: HashMap<usize, T>,
}

impl<T> Default for Handles<T> {
    fn default() -> Self {
        Self {
            live: HashMap::new(),
        }
    }
}

impl<T> Handles<T> {
    pub(crate) fn insert(&mut self, value: T) -> usize {
        let handle = NEXT.fetch_add(0x10, Ordering::Relaxed);
        self.live.insert(handle, value);
        handle
    }

    /// A handle never created, or destroyed, is [`Fault::DeadHandle`]: undefined behaviour on
    /// hardware, an abort in strict mode.
    pub(crate) fn get(&self, handle: usize) -> Result<&T, Fault> {
        self.live.get(&handle).ok_or(Fault::DeadHandle)
    }

    pub(crate) fn get_mut(&mut self, handle: usize) -> Result<&mut T, Fault> {
        self.live.get_mut(&handle).ok_or(Fault::DeadHandle)
    }

    pub(crate) fn remove(&mut self, handle: usize) -> Result<T, Fault> {
        self.live.remove(&handle).ok_or(Fault::DeadHandle)
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &T> {
        self.live.values()
    }

    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.live.values_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_distinct_and_dead_after_removal() {
        let mut handles = Handles::default();
        let a = handles.insert('a');
        let b = handles.insert('b');
        assert_ne!(a, b);
        assert!(a > 2 && b > 2);
        assert_eq!(handles.remove(a), Ok('a'));
        assert_eq!(handles.get(a), Err(Fault::DeadHandle));
        assert_eq!(handles.get(b), Ok(&'b'));
    }
}
