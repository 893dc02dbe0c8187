//! `macro_rules!` that write a `#[pymethods]` block every class of a kind
//! adds beside its own (PyO3's `multiple-pymethods`): `name!(PyFoo);`, or
//! with `///` lines before the type, which the block's
//! `$(#[doc = $doc])*` writes. The generator expands an invocation as
//! rustc would, for these two matchers only, and reads the block.

use std::collections::HashMap;
use std::str::FromStr;

use proc_macro2::{Delimiter, Group, Ident, TokenStream, TokenTree};
use quote::{quote, ToTokens};
use syn::parse::Parser;
use syn::{Attribute, Expr, Meta};

use super::StubError;

/// The matchers the generator expands: the type alone, or doc lines too.
const MATCHERS: [&str; 2] = ["$ty:ident", "$(#[doc = $doc:literal])* $ty:ident"];

/// The macros defined in the sources that write `#[pymethods]`, by name:
/// whether the matcher takes doc lines, and the transcriber.
#[derive(Default)]
pub(super) struct BlockMacros(HashMap<String, (bool, TokenStream)>);

fn err(file: &str, message: impl Into<String>) -> StubError {
    StubError {
        file: file.to_owned(),
        message: message.into(),
    }
}

fn is_punct(tree: Option<&TokenTree>, c: char) -> bool {
    matches!(tree, Some(TokenTree::Punct(p)) if p.as_char() == c)
}

/// Whether `tokens` begin with `#[pymethods]` (or `#[pyo3::pymethods]`).
fn writes_pymethods(tokens: &TokenStream) -> bool {
    let trees: Vec<TokenTree> = tokens.clone().into_iter().take(2).collect();
    match trees.as_slice() {
        [TokenTree::Punct(hash), TokenTree::Group(attr)] if hash.as_char() == '#' => attr
            .stream()
            .into_iter()
            .last()
            .is_some_and(|t| matches!(t, TokenTree::Ident(i) if i == "pymethods")),
        _ => false,
    }
}

impl BlockMacros {
    /// Records `item` if it is a `macro_rules!` that writes `#[pymethods]`.
    pub(super) fn define(&mut self, file: &str, item: &syn::ItemMacro) -> Result<(), StubError> {
        let (true, Some(name)) = (item.mac.path.is_ident("macro_rules"), &item.ident) else {
            return Ok(());
        };
        let trees: Vec<TokenTree> = item.mac.tokens.clone().into_iter().collect();
        // Each rule: `(matcher) => {transcriber}`, then `;` between rules.
        let rules: Vec<(String, TokenStream)> = trees
            .split(|t| is_punct(Some(t), ';'))
            .filter_map(|rule| match rule {
                [TokenTree::Group(matcher), _, _, TokenTree::Group(transcriber)] => {
                    Some((matcher.stream().to_string(), transcriber.stream()))
                }
                _ => None,
            })
            .collect();
        if !rules.iter().any(|(_, t)| writes_pymethods(t)) {
            return Ok(());
        }
        let [(matcher, transcriber)] = &rules[..] else {
            return Err(err(
                file,
                format!(
                    "macro_rules! {name} writes #[pymethods] in one of {} rules: the stub generator reads a macro of one rule",
                    rules.len()
                ),
            ));
        };
        let shape = MATCHERS
            .iter()
            .position(|m| TokenStream::from_str(m).is_ok_and(|m| m.to_string() == *matcher));
        let Some(shape) = shape else {
            return Err(err(
                file,
                format!(
                    "macro_rules! {name} writes #[pymethods], but its matcher is not `{}` or `{}`, the shapes the stub generator expands",
                    MATCHERS[0], MATCHERS[1]
                ),
            ));
        };
        if (self.0)
            .insert(name.to_string(), (shape == 1, transcriber.clone()))
            .is_some()
        {
            return Err(err(
                file,
                format!("macro_rules! {name} is defined twice: the stub generator could not tell which one an invocation expands"),
            ));
        }
        Ok(())
    }

    /// The items an invocation of such a macro expands to, or `None` when
    /// `item` invokes none.
    pub(super) fn expand(
        &self,
        file: &str,
        item: &syn::ItemMacro,
    ) -> Result<Option<syn::File>, StubError> {
        let Some(name) = item.mac.path.segments.last().map(|s| s.ident.to_string()) else {
            return Ok(None);
        };
        let Some((takes_docs, transcriber)) = self.0.get(&name).filter(|_| item.ident.is_none())
        else {
            return Ok(None);
        };
        let misread = || {
            let docs = if *takes_docs {
                "`///` doc lines and "
            } else {
                ""
            };
            err(
                file,
                format!("{name}! takes {docs}a type's name, as its matcher reads"),
            )
        };
        let parser = |input: syn::parse::ParseStream<'_>| {
            Ok((input.call(Attribute::parse_outer)?, input.parse::<Ident>()?))
        };
        let (attrs, ty) = parser
            .parse2(item.mac.tokens.clone())
            .map_err(|_| misread())?;
        let docs = attrs
            .iter()
            .map(|attr| match &attr.meta {
                Meta::NameValue(nv) if nv.path.is_ident("doc") && *takes_docs => match &nv.value {
                    Expr::Lit(lit) => Some(lit.to_token_stream()),
                    _ => None,
                },
                _ => None,
            })
            .collect::<Option<Vec<_>>>()
            .ok_or_else(misread)?;
        let expanded = transcribe(transcriber.clone(), &ty, &docs)
            .map_err(|what| err(file, format!("macro_rules! {name}: {what}")))?;
        syn::parse2(expanded).map(Some).map_err(|e| {
            err(
                file,
                format!("{name}!({ty}) expands to code that does not parse: {e}"),
            )
        })
    }
}

/// `tokens` with `$ty` as `ty`, `$(#[doc = $doc])*` as the `docs` lines,
/// and `$crate` as it is.
fn transcribe(
    tokens: TokenStream,
    ty: &Ident,
    docs: &[TokenStream],
) -> Result<TokenStream, String> {
    let mut out = TokenStream::new();
    let mut trees = tokens.into_iter();
    while let Some(tree) = trees.next() {
        match tree {
            TokenTree::Punct(p) if p.as_char() == '$' => match trees.next() {
                Some(TokenTree::Ident(i)) if i == "crate" => out.extend([TokenTree::Ident(i)]),
                Some(TokenTree::Ident(i)) if i == "ty" => {
                    out.extend([TokenTree::Ident(ty.clone())])
                }
                Some(TokenTree::Group(g))
                    if g.delimiter() == Delimiter::Parenthesis
                        && TokenStream::from_str("#[doc = $doc]")
                            .is_ok_and(|d| d.to_string() == g.stream().to_string())
                        && is_punct(trees.next().as_ref(), '*') =>
                {
                    out.extend(docs.iter().map(|doc| quote!(#[doc = #doc])));
                }
                other => {
                    let other = other.map_or(String::new(), |t| t.to_string());
                    return Err(format!(
                        "the stub generator expands `$ty`, `$crate` and `$(#[doc = $doc])*`, not `${other}`"
                    ));
                }
            },
            TokenTree::Group(g) => {
                let mut group = Group::new(g.delimiter(), transcribe(g.stream(), ty, docs)?);
                group.set_span(g.span());
                out.extend([TokenTree::Group(group)]);
            }
            other => out.extend([other]),
        }
    }
    Ok(out)
}
