//! Snapshots of `layout!` expansions.

use quote::quote;

use super::expand::expand;
use crate::expansion::pretty;

fn expand_macro(input: proc_macro2::TokenStream) -> String {
    pretty(expand(syn::parse2(input).expect("input parses")).expect("expansion"))
}

#[test]
fn row_major() {
    insta::assert_snapshot!(expand_macro(quote!(f32, [480, 640])));
}

#[test]
fn aligned_permutation() {
    insta::assert_snapshot!(expand_macro(quote!(
        u8,
        [1, 3, 224, 224],
        aligned(permuted(0, 2, 3, 1), unit_stride = 128, base = 256)
    )));
}

#[test]
fn every_error_at_once() {
    insta::assert_snapshot!(expand_macro(quote!(
        f32,
        [0, 2, 3],
        aligned(permuted(0, 0), unit_stride = 3, colour = 1)
    )));
}

#[test]
fn named_extents() {
    insta::assert_snapshot!(expand_macro(quote!(f32, [N, Self::COLS, 3])));
}
