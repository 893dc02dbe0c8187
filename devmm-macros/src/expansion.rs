//! Formatting expansions for the snapshot tests.

/// Formats generated items (or an expression, wrapped in a `const`).
pub(crate) fn pretty(tokens: proc_macro2::TokenStream) -> String {
    let file = syn::parse2::<syn::File>(tokens.clone())
        .or_else(|_| syn::parse2::<syn::File>(quote::quote!(const EXPANSION: _ = #tokens;)))
        .expect("the expansion parses as items or an expression");
    prettyplease::unparse(&file)
}
