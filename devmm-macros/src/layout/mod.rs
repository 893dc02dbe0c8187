//! `layout!`: a layout of a static shape resolved at compile time by
//! devmm's own `const fn` rule, after the checks a macro can make with spans.

pub(crate) mod expand;
pub(crate) mod parse;
pub(crate) mod validate;

#[cfg(test)]
mod tests;
