//! Collecting every error of one macro invocation, so the user sees them
//! all at once instead of fixing them one compile at a time.

use quote::ToTokens;
use std::fmt::Display;

/// The errors found so far.
#[derive(Default)]
pub(crate) struct Errors {
    first: Option<syn::Error>,
}

impl Errors {
    /// Records an error pointing at `tokens`.
    pub(crate) fn spanned(&mut self, tokens: impl ToTokens, message: impl Display) {
        self.push(syn::Error::new_spanned(tokens, message));
    }

    /// Records an error.
    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.first {
            Some(first) => first.combine(error),
            None => self.first = Some(error),
        }
    }

    /// `Err` with every error recorded, or `Ok(value)` when there were none.
    pub(crate) fn finish<T>(self, value: T) -> syn::Result<T> {
        match self.first {
            Some(error) => Err(error),
            None => Ok(value),
        }
    }
}
