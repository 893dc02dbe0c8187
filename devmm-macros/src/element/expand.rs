//! Generates `unsafe impl Element` and the assertions that make it sound.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::DeriveInput;

use super::validate;

pub(crate) fn expand(input: DeriveInput) -> syn::Result<TokenStream> {
    let element = validate::validate(&input)?;
    let name = &input.ident;
    let dtype = format_ident!("{}", element.dtype.konst);
    let dtype_name = element.dtype.name;
    let itemsize = element.dtype.itemsize;
    let span = element.dtype_token.span();
    let size_message = format!(
        "derive(Element): `{name}` is not the size of one {dtype_name} ({itemsize} bytes): \
         declare the dtype its bytes hold, or make its fields add up to {itemsize} bytes"
    );
    let align_message = format!(
        "derive(Element): `{name}` needs a stricter alignment than {dtype_name} buffers have: \
         remove `#[repr(align)]` or declare a dtype at least as aligned"
    );
    let size_check = quote_spanned! {span=>
        if ::core::mem::size_of::<#name>() != ::devmm::__private::DType::#dtype.itemsize() {
            ::core::panic!(#size_message)
        }
    };
    let align_check = quote_spanned! {span=>
        if ::core::mem::align_of::<#name>() > ::devmm::__private::DType::#dtype.alignment() {
            ::core::panic!(#align_message)
        }
    };
    let field_checks = element.fields.iter().map(|ty| {
        quote_spanned! {ty.span()=>
            assert_element::<#ty>();
        }
    });
    Ok(quote! {
        // SAFETY: the assertions below check at compile time that the type
        // is the dtype's size and no more aligned than its buffers, and that
        // every field is itself an `Element`, so any dtype element's bytes
        // are a valid value of the type.
        #[automatically_derived]
        unsafe impl ::devmm::__private::Element for #name {
            const DTYPE: ::devmm::__private::DType = ::devmm::__private::DType::#dtype;
        }

        const _: () = {
            #size_check
            #align_check
        };

        const _: fn() = || {
            fn assert_element<T: ::devmm::__private::Element>() {}
            #(#field_checks)*
        };
    })
}
