//! `macro_rules!` that wrap a class's `#[pymethods]` block to add the
//! methods every class of a kind shares (`name! { impl PyFoo { ... } }`).
//! The generator expands an invocation as rustc would, for the one shape
//! of macro it reads, and reads the block it expands to.

use std::collections::HashMap;
use std::str::FromStr;

use proc_macro2::{Delimiter, Group, TokenStream, TokenTree};
use quote::ToTokens;
use syn::{Expr, Meta};

use super::StubError;

/// A macro whose one rule reads `$(#[doc = $doc:literal])* impl $ty:ident
/// { $($body:tt)* }` (the doc part optional) and writes a `#[pymethods]`
/// block: the metavariables' names and the transcriber.
pub(super) struct Wrapper {
    doc: Option<String>,
    ty: String,
    body: String,
    transcriber: TokenStream,
}

/// The wrappers defined in the sources, by name.
#[derive(Default)]
pub(super) struct Wrappers(HashMap<String, Wrapper>);

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

/// The `$name:fragment` metavariables of a matcher, in order.
fn metavariables(tokens: TokenStream, out: &mut Vec<(String, String)>) {
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    for (i, tree) in trees.iter().enumerate() {
        match (tree, trees.get(i + 1), trees.get(i + 3)) {
            (TokenTree::Group(g), ..) => metavariables(g.stream(), out),
            (
                TokenTree::Punct(p),
                Some(TokenTree::Ident(name)),
                Some(TokenTree::Ident(fragment)),
            ) if p.as_char() == '$' && is_punct(trees.get(i + 2), ':') => {
                out.push((name.to_string(), fragment.to_string()));
            }
            _ => {}
        }
    }
}

impl Wrappers {
    /// Records `item` if it is a `macro_rules!` that writes `#[pymethods]`.
    pub(super) fn define(&mut self, file: &str, item: &syn::ItemMacro) -> Result<(), StubError> {
        let (true, Some(name)) = (item.mac.path.is_ident("macro_rules"), &item.ident) else {
            return Ok(());
        };
        let trees: Vec<TokenTree> = item.mac.tokens.clone().into_iter().collect();
        // Each rule: `(matcher) => {transcriber}`, then `;` between rules.
        let rules: Vec<(TokenStream, TokenStream)> = trees
            .split(|t| is_punct(Some(t), ';'))
            .filter_map(|rule| match rule {
                [TokenTree::Group(matcher), _, _, TokenTree::Group(transcriber)] => {
                    Some((matcher.stream(), transcriber.stream()))
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
                    "macro_rules! {name} writes #[pymethods] in one of {} rules: the stub generator reads a wrapper of one rule",
                    rules.len()
                ),
            ));
        };
        let mut vars = Vec::new();
        metavariables(matcher.clone(), &mut vars);
        let shape = |doc: Option<&str>, ty: &str, body: &str| {
            let doc = doc.map_or(String::new(), |d| format!("$(#[doc = ${d}:literal])*"));
            let text = format!("{doc} impl ${ty}:ident {{ $(${body}:tt)* }}");
            TokenStream::from_str(&text).map(|t| t.to_string()).ok()
        };
        let names: Vec<&str> = vars.iter().map(|(n, _)| n.as_str()).collect();
        let (doc, ty, body) = match names[..] {
            [doc, ty, body] => (Some(doc), ty, body),
            [ty, body] => (None, ty, body),
            _ => (None, "", ""), // fails the shape check below
        };
        if ty.is_empty() || shape(doc, ty, body) != Some(matcher.to_string()) {
            return Err(err(
                file,
                format!(
                    "macro_rules! {name} writes #[pymethods], but its matcher is not \
                     `$(#[doc = $doc:literal])* impl $ty:ident {{ $($body:tt)* }}` (doc lines optional), \
                     the one shape the stub generator expands"
                ),
            ));
        }
        let wrapper = Wrapper {
            doc: doc.map(str::to_owned),
            ty: ty.to_owned(),
            body: body.to_owned(),
            transcriber: transcriber.clone(),
        };
        if self.0.insert(name.to_string(), wrapper).is_some() {
            return Err(err(
                file,
                format!("macro_rules! {name} is defined twice: the stub generator could not tell which one an invocation expands"),
            ));
        }
        Ok(())
    }

    /// The items an invocation of a wrapper expands to, or `None` when
    /// `item` invokes no wrapper.
    pub(super) fn expand(
        &self,
        file: &str,
        item: &syn::ItemMacro,
    ) -> Result<Option<syn::File>, StubError> {
        let Some(name) = item.mac.path.segments.last().map(|s| s.ident.to_string()) else {
            return Ok(None);
        };
        let Some(wrapper) = self.0.get(&name).filter(|_| item.ident.is_none()) else {
            return Ok(None);
        };
        let misread = || {
            let doc = if wrapper.doc.is_some() {
                "`///` doc lines and "
            } else {
                ""
            };
            err(
                file,
                format!("{name}! takes {doc}`impl Type {{ ... }}`, as its matcher reads"),
            )
        };
        let imp: syn::ItemImpl = syn::parse2(item.mac.tokens.clone()).map_err(|_| misread())?;
        let ty = match &*imp.self_ty {
            syn::Type::Path(p) => p.path.get_ident().cloned(),
            _ => None,
        };
        let docs = imp
            .attrs
            .iter()
            .map(|attr| match &attr.meta {
                Meta::NameValue(nv) if nv.path.is_ident("doc") && wrapper.doc.is_some() => {
                    match &nv.value {
                        Expr::Lit(lit) => Some(lit.to_token_stream()),
                        _ => None,
                    }
                }
                _ => None,
            })
            .collect::<Option<Vec<_>>>();
        let (Some(ty), Some(docs), None, None) = (ty, docs, &imp.trait_, &imp.unsafety) else {
            return Err(misread());
        };
        let body: TokenStream = imp.items.iter().map(ToTokens::to_token_stream).collect();
        let ty = ty.into_token_stream();
        let bindings = Bindings {
            wrapper,
            ty: &ty,
            body: &body,
            docs: &docs,
            doc: None,
        };
        let expanded = bindings
            .transcribe(wrapper.transcriber.clone())
            .map_err(|what| err(file, format!("macro_rules! {name}: {what}")))?;
        syn::parse2(expanded).map(Some).map_err(|e| {
            err(
                file,
                format!(
                    "{name}! {{ impl {} ... }} expands to code that does not parse: {e}",
                    imp.self_ty.to_token_stream()
                ),
            )
        })
    }
}

/// What an invocation binds the wrapper's metavariables to.
#[derive(Clone, Copy)]
struct Bindings<'a> {
    wrapper: &'a Wrapper,
    ty: &'a TokenStream,
    body: &'a TokenStream,
    docs: &'a [TokenStream],
    /// The doc line of the repetition being transcribed, if any.
    doc: Option<&'a TokenStream>,
}

impl Bindings<'_> {
    fn transcribe(&self, tokens: TokenStream) -> Result<TokenStream, String> {
        let mut out = TokenStream::new();
        let mut trees = tokens.into_iter().peekable();
        while let Some(tree) = trees.next() {
            match tree {
                TokenTree::Punct(p) if p.as_char() == '$' => match trees.next() {
                    Some(TokenTree::Ident(i)) if i == "crate" => out.extend([TokenTree::Ident(i)]),
                    Some(TokenTree::Ident(i)) if i == self.wrapper.ty => {
                        out.extend(self.ty.clone())
                    }
                    Some(TokenTree::Ident(i)) if Some(i.to_string()) == self.wrapper.doc => {
                        out.extend(self.doc.cloned().ok_or("`$doc` outside its repetition")?)
                    }
                    Some(TokenTree::Ident(i)) if i == self.wrapper.body => {
                        out.extend(self.body.clone())
                    }
                    Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis => {
                        if !is_punct(trees.next().as_ref(), '*') {
                            return Err("write repetitions `$(...)*`, without a separator".into());
                        }
                        let repeats_doc = self
                            .wrapper
                            .doc
                            .as_ref()
                            .is_some_and(|doc| mentions(&g.stream(), doc));
                        if repeats_doc {
                            for doc in self.docs {
                                let one = Bindings {
                                    doc: Some(doc),
                                    ..*self
                                };
                                out.extend(one.transcribe(g.stream())?);
                            }
                        } else {
                            out.extend(self.transcribe(g.stream())?);
                        }
                    }
                    other => {
                        let other = other.map_or(String::new(), |t| t.to_string());
                        return Err(format!("the stub generator cannot expand `${other}`"));
                    }
                },
                TokenTree::Group(g) => {
                    let mut group = Group::new(g.delimiter(), self.transcribe(g.stream())?);
                    group.set_span(g.span());
                    out.extend([TokenTree::Group(group)]);
                }
                other => out.extend([other]),
            }
        }
        Ok(out)
    }
}

/// Whether `tokens` mention the metavariable `$name`.
fn mentions(tokens: &TokenStream, name: &str) -> bool {
    let trees: Vec<TokenTree> = tokens.clone().into_iter().collect();
    trees.iter().enumerate().any(|(i, tree)| match tree {
        TokenTree::Group(g) => mentions(&g.stream(), name),
        TokenTree::Punct(p) if p.as_char() == '$' => {
            matches!(trees.get(i + 1), Some(TokenTree::Ident(n)) if n == name)
        }
        _ => false,
    })
}
