//! `layout!(ELEMENT, [EXTENT, ..] [, POLICY])`, where EXTENT is an integer
//! literal or the path of a `usize` constant, and POLICY is `row_major`,
//! `col_major`, `permuted(D, ..)` or `aligned(INNER, unit_stride = N, base = N)`.

use proc_macro2::Span;
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{bracketed, parenthesized, token, Expr, Ident, LitInt, Token, Type};

pub(crate) struct Input {
    pub(crate) element: Type,
    pub(crate) bracket: token::Bracket,
    /// The extents as written; validation sorts literals from named
    /// constants and refuses anything else.
    pub(crate) shape: Punctuated<Expr, Token![,]>,
    pub(crate) policy: Option<Policy>,
}

/// A policy as written: its name and arguments.
pub(crate) struct Policy {
    pub(crate) name: Ident,
    pub(crate) args: PolicyArgs,
}

pub(crate) enum PolicyArgs {
    /// `row_major`, `col_major`, or an unknown name.
    None,
    /// `permuted(0, 2, 1)`.
    Order(token::Paren, Punctuated<LitInt, Token![,]>),
    /// `aligned(inner, unit_stride = 128, base = 256)`.
    Aligned(Box<Policy>, Vec<(Ident, LitInt)>),
}

impl Parse for Input {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let element = input.parse()?;
        input.parse::<Token![,]>()?;
        let content;
        let bracket = bracketed!(content in input);
        let shape = Punctuated::parse_terminated(&content)?;
        let policy = if input.parse::<Option<Token![,]>>()?.is_some() && !input.is_empty() {
            Some(input.parse()?)
        } else {
            None
        };
        input.parse::<Option<Token![,]>>()?;
        if !input.is_empty() {
            return Err(
                input.error("unexpected tokens: write `layout!(ELEMENT, [EXTENT, ..], POLICY)`")
            );
        }
        Ok(Input {
            element,
            bracket,
            shape,
            policy,
        })
    }
}

impl Parse for Policy {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let name = input.call(Ident::parse_any)?;
        if !input.peek(token::Paren) {
            return Ok(Policy {
                name,
                args: PolicyArgs::None,
            });
        }
        let content;
        let paren = parenthesized!(content in input);
        let args = if name == "aligned" {
            let inner = content.parse()?;
            let mut keys = Vec::new();
            while !content.is_empty() {
                content.parse::<Token![,]>()?;
                if content.is_empty() {
                    break;
                }
                let key = content.call(Ident::parse_any)?;
                content.parse::<Token![=]>()?;
                keys.push((key, content.parse()?));
            }
            PolicyArgs::Aligned(Box::new(inner), keys)
        } else {
            PolicyArgs::Order(paren, Punctuated::parse_terminated(&content)?)
        };
        Ok(Policy { name, args })
    }
}

impl Policy {
    /// The default when no policy is written.
    pub(crate) fn row_major() -> Policy {
        Policy {
            name: Ident::new("row_major", Span::call_site()),
            args: PolicyArgs::None,
        }
    }
}
