//! The checks `layout!` makes before anything compiles. What needs the
//! element's size (row padding finer than an element, sizes overflowing
//! `usize`) is left to the `const` evaluation the expansion performs.

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::{Expr, ExprLit, ExprPath, Ident, Lit, LitInt, Path, Type};

use super::parse::{Input, Policy, PolicyArgs};
use crate::diagnostics::Errors;

pub(crate) struct Layout {
    pub(crate) element: Type,
    pub(crate) shape: Vec<Extent>,
    /// The tokens of the shape, where overflow is reported.
    pub(crate) shape_tokens: TokenStream,
    pub(crate) order: Order,
    pub(crate) aligned: Option<Aligned>,
}

/// One extent: checked here when a literal, at compile time when named.
pub(crate) enum Extent {
    Literal(LitInt),
    /// A const item or const generic, by path (`N`, `Self::ROWS`).
    Named(Path),
}

pub(crate) enum Order {
    RowMajor,
    ColMajor,
    Permuted(Vec<LitInt>),
}

pub(crate) struct Aligned {
    pub(crate) unit_stride: LitInt,
    pub(crate) base: LitInt,
}

const POLICIES: &str =
    "row_major, col_major, permuted(D, ..) or aligned(POLICY, unit_stride = N, base = N)";

pub(crate) fn validate(input: Input) -> syn::Result<Layout> {
    let mut errors = Errors::default();
    let rank = input.shape.len();
    let mut shape = Vec::with_capacity(rank);
    for extent in &input.shape {
        match extent {
            Expr::Lit(ExprLit {
                lit: Lit::Int(extent),
                ..
            }) => {
                match extent.base10_parse::<u64>() {
                    Ok(0) => errors.spanned(
                        extent,
                        "a zero extent makes a layout with no elements: use an extent of at least 1",
                    ),
                    Ok(_) => {}
                    Err(_) => errors.spanned(
                        extent,
                        format_args!("extent {extent} does not fit a 64-bit size: use a smaller shape"),
                    ),
                }
                shape.push(Extent::Literal(extent.clone()));
            }
            Expr::Path(ExprPath {
                qself: None, path, ..
            }) => shape.push(Extent::Named(path.clone())),
            other => errors.spanned(
                other,
                "an extent is an integer literal or the name of a `usize` constant (a const item \
                 or a const generic): write e.g. `[480, COLS]`, with `const COLS: usize = 2 * 320;` \
                 for a computed extent",
            ),
        }
    }
    let mut shape_tokens = TokenStream::new();
    input
        .bracket
        .surround(&mut shape_tokens, |t| input.shape.to_tokens(t));
    let policy = input.policy.unwrap_or_else(Policy::row_major);
    let (order, aligned) = match policy.name.to_string().as_str() {
        "aligned" => match policy.args {
            PolicyArgs::Aligned(inner, keys) => {
                let order = if inner.name == "aligned" {
                    errors.spanned(
                        &inner.name,
                        "aligned(..) wraps row_major, col_major or permuted(..), not another aligned(..): \
                         give the larger alignments to one aligned(..)",
                    );
                    None
                } else {
                    order_of(&inner, rank, &mut errors)
                };
                let aligned = aligned_keys(&policy.name, keys, &mut errors);
                (order, aligned)
            }
            _ => {
                errors.spanned(
                    &policy.name,
                    "write `aligned(POLICY, unit_stride = N, base = N)`, e.g. \
                     `aligned(row_major, unit_stride = 128, base = 256)`",
                );
                (None, None)
            }
        },
        _ => (order_of(&policy, rank, &mut errors), None),
    };
    let layout = Layout {
        element: input.element,
        shape,
        shape_tokens,
        order: order.unwrap_or(Order::RowMajor),
        aligned,
    };
    errors.finish(layout)
}

fn order_of(policy: &Policy, rank: usize, errors: &mut Errors) -> Option<Order> {
    match (policy.name.to_string().as_str(), &policy.args) {
        ("row_major", PolicyArgs::None) => Some(Order::RowMajor),
        ("col_major", PolicyArgs::None) => Some(Order::ColMajor),
        ("permuted", PolicyArgs::Order(paren, dims)) => {
            let mut seen = vec![false; rank];
            let mut ok = true;
            for dim in dims {
                match dim.base10_parse::<usize>() {
                    Ok(d) if d < rank && !seen[d] => seen[d] = true,
                    Ok(d) if d < rank => {
                        ok = false;
                        errors.spanned(
                            dim,
                            format_args!(
                                "dimension {d} is listed twice: a permutation lists each of 0..{rank} \
                                 exactly once, outermost first"
                            ),
                        );
                    }
                    _ => {
                        ok = false;
                        errors.spanned(
                            dim,
                            format_args!(
                                "the shape has {rank} dimensions, so there is no dimension {dim}: \
                                 use 0..{rank}"
                            ),
                        );
                    }
                }
            }
            if dims.len() != rank {
                ok = false;
                let mut group = TokenStream::new();
                paren.surround(&mut group, |t| dims.to_tokens(t));
                errors.spanned(
                    group,
                    format_args!(
                        "permuted(..) lists {} dimensions but the shape has {rank}: list each of \
                         0..{rank} exactly once, outermost first",
                        dims.len()
                    ),
                );
            }
            ok.then(|| Order::Permuted(dims.iter().cloned().collect()))
        }
        (name @ ("row_major" | "col_major"), _) => {
            errors.spanned(
                &policy.name,
                format_args!("`{name}` takes no arguments: write `{name}`"),
            );
            None
        }
        ("permuted", _) => {
            errors.spanned(
                &policy.name,
                "write the dimension order, outermost first: e.g. `permuted(0, 2, 3, 1)`",
            );
            None
        }
        (name, _) => {
            errors.spanned(
                &policy.name,
                format_args!("unknown layout policy `{name}`: use {POLICIES}"),
            );
            None
        }
    }
}

fn aligned_keys(name: &Ident, keys: Vec<(Ident, LitInt)>, errors: &mut Errors) -> Option<Aligned> {
    let mut unit_stride = None;
    let mut base = None;
    for (key, value) in keys {
        let slot = match key.to_string().as_str() {
            "unit_stride" => &mut unit_stride,
            "base" => &mut base,
            other => {
                errors.spanned(
                    &key,
                    format_args!(
                        "unknown key `{other}`: aligned(..) accepts `unit_stride` (bytes each row is \
                         padded to) and `base` (alignment of the first element)"
                    ),
                );
                continue;
            }
        };
        if slot.is_some() {
            errors.spanned(&key, format_args!("`{key}` is given twice; keep one"));
            continue;
        }
        // Rows pad to any positive multiple (the seed's rule); the base is
        // a pointer alignment, so a power of two.
        match (key == "base", value.base10_parse::<u64>()) {
            (true, Ok(n)) if n.is_power_of_two() => *slot = Some(value),
            (false, Ok(n)) if n > 0 => *slot = Some(value),
            (true, _) => errors.spanned(
                &value,
                format_args!(
                    "{key} = {value} is not a power of two: use 1, 2, 4, 8, ... (1 for none)"
                ),
            ),
            (false, _) => errors.spanned(
                &value,
                format_args!(
                    "{key} = {value} is not a positive byte count: rows pad to a multiple of it (1 for none)"
                ),
            ),
        }
    }
    let one = || LitInt::new("1", name.span());
    Some(Aligned {
        unit_stride: unit_stride.unwrap_or_else(one),
        base: base.unwrap_or_else(one),
    })
}
