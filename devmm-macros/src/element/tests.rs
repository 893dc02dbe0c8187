//! Snapshots of `#[derive(Element)]` expansions.

use quote::quote;

use super::expand::expand;
use crate::expansion::pretty;

#[test]
fn transparent_wrapper() {
    let input = syn::parse2(quote! {
        #[repr(transparent)]
        #[element(dtype = "float32")]
        struct Celsius(f32);
    })
    .expect("input parses");
    insta::assert_snapshot!(pretty(expand(input).expect("expansion")));
}

#[test]
fn complex_pair() {
    let input = syn::parse2(quote! {
        #[repr(C)]
        #[element(dtype = "complex64")]
        struct Complex { re: f32, im: f32 }
    })
    .expect("input parses");
    insta::assert_snapshot!(pretty(expand(input).expect("expansion")));
}
