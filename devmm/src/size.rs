//! Overflow-checked size arithmetic.
//!
//! Every byte count devmm derives from user input goes through these, so an
//! absurd shape is an [`Error::InvalidLayout`], never a wrapped size or a panic.

use crate::error::{Error, Result};

/// Multiplies sizes, naming what overflowed.
pub(crate) fn checked_mul(a: usize, b: usize, what: &str) -> Result<usize> {
    a.checked_mul(b).ok_or_else(|| {
        Error::layout(format!(
            "{what} overflows usize ({a} * {b}); use a smaller shape"
        ))
    })
}

/// Adds sizes, naming what overflowed.
pub(crate) fn checked_add(a: usize, b: usize, what: &str) -> Result<usize> {
    a.checked_add(b).ok_or_else(|| {
        Error::layout(format!(
            "{what} overflows usize ({a} + {b}); use a smaller shape"
        ))
    })
}

/// Rounds `n` up to a multiple of the power of two `align`.
pub(crate) fn round_up(n: usize, align: usize, what: &str) -> Result<usize> {
    debug_assert!(align.is_power_of_two());
    Ok(checked_add(n, align - 1, what)? & !(align - 1))
}
