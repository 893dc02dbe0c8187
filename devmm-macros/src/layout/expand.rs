//! Generates a `const` `StaticLayout` from a validated `layout!`.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

use super::parse::Input;
use super::validate::{self, Extent, Order};

/// Expands `layout!`; on errors, a block of them that still has a type
/// (`!`), so the surrounding code does not fail as well.
pub(crate) fn expand(input: Input) -> syn::Result<TokenStream> {
    let layout = match validate::validate(input) {
        Ok(layout) => layout,
        Err(errors) => {
            let errors = errors.into_compile_error();
            return Ok(quote!({ #errors ::core::unreachable!() }));
        }
    };
    let rank = layout.shape.len();
    let element = &layout.element;
    let extents = layout.shape.iter().map(|extent| match extent {
        Extent::Literal(e) => {
            let digits = syn::LitInt::new(&format!("{}usize", e.base10_digits()), e.span());
            quote!(#digits)
        }
        // Checked where the layout is evaluated, pointing at the name.
        Extent::Named(name) => quote_spanned! {name.span()=>
            match #name {
                0 => ::core::panic!(::core::concat!(
                    "layout!: the extent `", ::core::stringify!(#name),
                    "` is zero, which makes a layout with no elements: use an extent of at least 1"
                )),
                extent => extent,
            }
        },
    });
    let mut plan = match &layout.order {
        Order::RowMajor => quote!(::devmm::__private::StaticPlan::<#rank>::row_major()),
        Order::ColMajor => quote!(::devmm::__private::StaticPlan::<#rank>::col_major()),
        Order::Permuted(dims) => {
            let dims = dims
                .iter()
                .map(|d| syn::LitInt::new(&format!("{}usize", d.base10_digits()), d.span()));
            quote!(::devmm::__private::StaticPlan::<#rank>::permuted([#(#dims),*]))
        }
    };
    if let Some(aligned) = &layout.aligned {
        let (unit, base) = (&aligned.unit_stride, &aligned.base);
        plan = quote!(#plan.aligned(#unit, #base));
    }
    let overflow = quote_spanned! {layout.shape_tokens.span()=>
        ::core::result::Result::Err(::devmm::__private::LayoutRuleError::Overflow(_)) => {
            ::core::panic!("layout!: the layout's size overflows usize: use a smaller shape")
        }
    };
    // An inline `const` block, not a `const` item: it may name the const
    // generics of the function it is written in.
    Ok(quote! {
        const {
            match ::devmm::__private::StaticLayout::<#rank>::resolve(
                [#(#extents),*],
                <#element as ::devmm::__private::Element>::DTYPE,
                #plan,
            ) {
                ::core::result::Result::Ok(layout) => layout,
                #overflow
                // The macro has already refused bad orders and alignments.
                ::core::result::Result::Err(_) => ::core::panic!("layout!: invalid layout"),
            }
        }
    })
}
