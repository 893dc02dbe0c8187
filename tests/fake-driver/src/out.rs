//! Out-parameters: the `T*` arguments through which C functions return values.

use std::ptr::NonNull;

use crate::platform::Fault;

/// A checked, writable out-parameter. Checked before any work is done, so a null pointer fails
/// the call without allocating anything that could then not be returned.
#[derive(Debug)]
pub(crate) struct Out<T>(NonNull<T>);

impl<T> Out<T> {
    /// A null pointer is an invalid value.
    ///
    /// # Safety
    /// `ptr` is null or valid for a write of `T` (the C API's contract for its out-parameters).
    pub(crate) unsafe fn new(ptr: *mut T) -> Result<Self, Fault> {
        NonNull::new(ptr).map(Out).ok_or(Fault::InvalidValue)
    }

    pub(crate) fn set(self, value: T) {
        // SAFETY: non-null, and valid for a write by the contract of `Out::new`.
        unsafe { self.0.as_ptr().write(value) }
    }
}
