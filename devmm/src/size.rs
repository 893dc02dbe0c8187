//! Overflow-checked size arithmetic.
//!
//! Every byte count devmm derives from user input goes through these, so an
//! absurd shape is an [`Error::InvalidLayout`], never a wrapped size or a panic.
//! They are `const fn` so the layout rule runs unchanged at compile time
//! (`layout!`); the overflow converts to an [`Error`] at run time.

use crate::error::Error;

/// A size computation that does not fit `usize`: what was computed and
/// the operands, for the message. Converts to [`Error::InvalidLayout`].
///
/// ```
/// use devmm::{DType, LayoutRuleError, StaticLayout, StaticPlan};
/// let huge = StaticLayout::resolve([usize::MAX, 2], DType::FLOAT64, StaticPlan::row_major());
/// let Err(LayoutRuleError::Overflow(overflow)) = huge else { panic!("{huge:?}") };
/// assert!(devmm::Error::from(overflow).to_string().contains("overflows usize"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SizeOverflow {
    what: &'static str,
    a: usize,
    b: usize,
    op: char,
}

impl From<SizeOverflow> for Error {
    fn from(o: SizeOverflow) -> Error {
        Error::layout(format!(
            "{} overflows usize ({} {} {}); use a smaller shape",
            o.what, o.a, o.op, o.b
        ))
    }
}

/// Multiplies sizes, naming what overflowed.
pub(crate) const fn checked_mul(
    a: usize,
    b: usize,
    what: &'static str,
) -> Result<usize, SizeOverflow> {
    match a.checked_mul(b) {
        Some(n) => Ok(n),
        None => Err(SizeOverflow {
            what,
            a,
            b,
            op: '*',
        }),
    }
}

/// Adds sizes, naming what overflowed.
pub(crate) const fn checked_add(
    a: usize,
    b: usize,
    what: &'static str,
) -> Result<usize, SizeOverflow> {
    match a.checked_add(b) {
        Some(n) => Ok(n),
        None => Err(SizeOverflow {
            what,
            a,
            b,
            op: '+',
        }),
    }
}

/// Rounds `n` up to a multiple of the power of two `align`.
pub(crate) const fn round_up(
    n: usize,
    align: usize,
    what: &'static str,
) -> Result<usize, SizeOverflow> {
    debug_assert!(align.is_power_of_two());
    match checked_add(n, align - 1, what) {
        Ok(n) => Ok(n & !(align - 1)),
        Err(e) => Err(e),
    }
}

/// Rounds `n` up to a multiple of `multiple` (any non-zero value).
pub(crate) const fn round_up_multiple(
    n: usize,
    multiple: usize,
    what: &'static str,
) -> Result<usize, SizeOverflow> {
    match checked_add(n, multiple - 1, what) {
        Ok(n) => checked_mul(n / multiple, multiple, what),
        Err(e) => Err(e),
    }
}

/// The least common multiple of two non-zero sizes.
pub(crate) const fn lcm(a: usize, b: usize, what: &'static str) -> Result<usize, SizeOverflow> {
    let (mut x, mut y) = (a, b);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    checked_mul(a / x, b, what)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_names_the_quantity_and_operands() {
        let e = Error::from(checked_mul(usize::MAX, 2, "stride").unwrap_err());
        assert_eq!(
            e.to_string(),
            format!(
                "invalid layout: stride overflows usize ({} * 2); use a smaller shape",
                usize::MAX
            )
        );
        assert!(checked_add(usize::MAX, 1, "x").is_err());
        assert!(round_up(usize::MAX, 2, "x").is_err());
    }

    #[test]
    fn rounding_and_lcm() {
        assert_eq!(round_up(65, 64, "x"), Ok(128));
        assert_eq!(round_up_multiple(13, 12, "x"), Ok(24));
        assert_eq!(round_up_multiple(24, 12, "x"), Ok(24));
        assert_eq!(lcm(128, 12, "x"), Ok(384));
        assert_eq!(lcm(1, 4, "x"), Ok(4));
    }
}
