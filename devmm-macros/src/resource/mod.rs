//! `#[memory_resource]`: a `MemoryResource` implementation from an inherent
//! impl block, and adaptors that forward to an `#[upstream]` field.

pub(crate) mod expand;
pub(crate) mod parse;
mod signature;
pub(crate) mod validate;

#[cfg(test)]
mod tests;
