//! The syntax `#[memory_resource]` accepts, kept as the user wrote it so
//! every error can point at the token at fault.

use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Expr, Ident, ItemImpl, ItemStruct, Token};

/// One `key = value` argument.
pub(crate) struct Arg {
    pub(crate) key: Ident,
    pub(crate) value: Expr,
}

impl Parse for Arg {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        // Any ident, keywords included, so a misspelt key gets our message.
        let key: Ident = input.call(Ident::parse_any)?;
        input.parse::<Token![=]>().map_err(|e| {
            syn::Error::new(
                e.span(),
                format_args!("expected `{key} = value` (e.g. `alignment = 64`)"),
            )
        })?;
        Ok(Arg {
            key,
            value: input.parse()?,
        })
    }
}

/// The attribute's arguments, in order.
pub(crate) struct Args {
    pub(crate) args: Vec<Arg>,
}

impl Parse for Args {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let args = Punctuated::<Arg, Token![,]>::parse_terminated(input)?;
        Ok(Args {
            args: args.into_iter().collect(),
        })
    }
}

/// What the attribute is on.
pub(crate) enum Item {
    /// An adaptor's struct, holding an `#[upstream]` field.
    Struct(ItemStruct),
    /// The functions of a resource or adaptor.
    Impl(ItemImpl),
}

impl Parse for Item {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        match input.parse::<syn::Item>()? {
            syn::Item::Struct(item) => Ok(Item::Struct(item)),
            syn::Item::Impl(item) => Ok(Item::Impl(item)),
            other => Err(syn::Error::new_spanned(
                other,
                "#[memory_resource] goes on an inherent impl block holding `fn allocate` and \
                 `unsafe fn deallocate`, or on an adaptor's struct with an `#[upstream]` field",
            )),
        }
    }
}
