//! Procedural macros for devmm: `#[memory_resource]`, generated adaptors,
//! `layout!` and `#[derive(Element)]`.
//!
//! Users depend on `devmm`, which re-exports these macros and documents
//! them; this crate is an implementation detail whose version the facade
//! pins exactly. Each macro is parsed (`parse`), checked (`validate`, every
//! error collected in one pass and spanned on the user's token) and
//! generated (`expand`), naming everything through `::devmm::__private`.

use proc_macro::TokenStream;
use syn::parse_macro_input;

mod diagnostics;
mod element;
#[cfg(test)]
mod expansion;
mod layout;
mod names;
mod resource;

/// Generates a `MemoryResource` implementation; documented on `devmm::memory_resource`.
#[proc_macro_attribute]
pub fn memory_resource(args: TokenStream, item: TokenStream) -> TokenStream {
    let args = parse_macro_input!(args as resource::parse::Args);
    let item = parse_macro_input!(item as resource::parse::Item);
    resource::expand::expand(args, item)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// A layout resolved at compile time; documented on `devmm::layout`.
#[proc_macro]
pub fn layout(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as layout::parse::Input);
    layout::expand::expand(input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// Implements `devmm::Element` for a `#[repr(C)]` or `#[repr(transparent)]`
/// type; documented on `devmm::Element`.
#[proc_macro_derive(Element, attributes(element))]
pub fn derive_element(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as syn::DeriveInput);
    element::expand::expand(input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}
