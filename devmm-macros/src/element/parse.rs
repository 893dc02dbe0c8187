//! The attributes `#[derive(Element)]` reads: `#[repr(..)]` and
//! `#[element(dtype = "..")]`, kept with their tokens.

use syn::{Attribute, Ident, LitStr, Meta};

/// The parts of a `#[repr(..)]` that matter: `C` or `transparent`.
pub(crate) fn repr_kinds(attrs: &[Attribute]) -> syn::Result<Vec<Ident>> {
    let mut kinds = Vec::new();
    for attr in attrs.iter().filter(|a| a.path().is_ident("repr")) {
        attr.parse_nested_meta(|meta| {
            if let Some(ident) = meta.path.get_ident() {
                kinds.push(ident.clone());
            }
            // `align(N)` and `packed(N)` carry arguments; skip them.
            if meta.input.peek(syn::token::Paren) {
                let content;
                syn::parenthesized!(content in meta.input);
                content.parse::<proc_macro2::TokenStream>()?;
            }
            Ok(())
        })?;
    }
    Ok(kinds)
}

/// One `key = value` of `#[element(..)]`.
pub(crate) struct ElementArg {
    pub(crate) key: Ident,
    pub(crate) value: Option<LitStr>,
    /// The argument as written, for errors about it as a whole.
    pub(crate) meta: Meta,
}

/// Every argument of every `#[element(..)]` attribute, with the attribute.
pub(crate) fn element_args(attrs: &[Attribute]) -> syn::Result<Vec<(Attribute, Vec<ElementArg>)>> {
    attrs
        .iter()
        .filter(|a| a.path().is_ident("element"))
        .map(|attr| {
            let metas = attr.parse_args_with(
                syn::punctuated::Punctuated::<Meta, syn::Token![,]>::parse_terminated,
            )?;
            let args = metas
                .into_iter()
                .filter_map(|meta| {
                    let key = meta.path().get_ident()?.clone();
                    let value = match &meta {
                        Meta::NameValue(nv) => match &nv.value {
                            syn::Expr::Lit(syn::ExprLit {
                                lit: syn::Lit::Str(s),
                                ..
                            }) => Some(s.clone()),
                            _ => None,
                        },
                        _ => None,
                    };
                    Some(ElementArg { key, value, meta })
                })
                .collect();
            Ok((attr.clone(), args))
        })
        .collect()
}
