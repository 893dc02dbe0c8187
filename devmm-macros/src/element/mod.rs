//! `#[derive(Element)]`: a user type over a DLPack dtype, with its size and
//! alignment checked against the dtype at compile time.

pub(crate) mod expand;
pub(crate) mod parse;
pub(crate) mod validate;

#[cfg(test)]
mod tests;
