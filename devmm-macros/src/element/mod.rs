pub(crate) mod expand;
pub(crate) mod parse;
