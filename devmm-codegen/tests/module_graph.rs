//! The modules of the core crate (`devmm/src`), and those of the binding
//! crate (`devmm-python/src`), use each other without a
//! cycle (issue 32, "One rule, one place"): each concept sits on a level,
//! and a module only reaches down. This test reads the crate's sources
//! with `syn`, builds the graph of which module names which, and fails on
//! any strongly connected component of more than one module, printing its
//! modules and the edges inside it.
//!
//! The rules:
//!
//! - The modules are the ones `lib.rs` declares, followed through `mod x;`
//!   (`x.rs`, `x/mod.rs` or a `#[path]`) and inline `mod x { ... }`. Code
//!   generated at build time (`include!` of `OUT_DIR`) is not read.
//! - Items under `#[cfg(test)]` (the `tests` modules) are left out: a unit
//!   test may use whatever it tests with.
//! - Every path that starts with `crate::`, `$crate::`, `super::` or
//!   `self::` counts, in `use` trees and anywhere else in the code (types,
//!   expressions, macro bodies). So does a `use` of a child module's items
//!   by its bare name (`use device::Device` in `lib.rs`).
//! - A path is resolved to the module that defines what it names: child
//!   modules are followed, and so are the names a module imports or
//!   re-exports (`crate::Device` is `lib.rs`'s re-export of
//!   `device::Device`, so it names `device`, not the crate root).
//! - An edge between a module and one of its ancestors or descendants is
//!   ignored: a parent declares and re-exports its children, and children
//!   use their parent's items; that is how Rust modules are built. Every
//!   other edge counts.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use quote::ToTokens;

/// A module's path from the crate root (`["runtime", "cuda"]`); the root is
/// empty.
type ModPath = Vec<String>;

/// What the crate's sources say about one module.
#[derive(Default)]
struct Module {
    /// The file it is written in (for messages).
    file: PathBuf,
    /// Its child modules.
    children: BTreeSet<String>,
    /// Each name its `use` items bind, to the absolute path it names.
    bindings: BTreeMap<String, ModPath>,
    /// Every crate path its code writes, as written, made absolute.
    paths: Vec<(ModPath, String)>,
}

/// The modules of the crate rooted at `lib`.
fn read_crate(lib: &Path) -> BTreeMap<ModPath, Module> {
    let mut modules = BTreeMap::new();
    read_file(lib, Vec::new(), lib.parent().unwrap(), &mut modules);
    modules
}

/// Reads the module `path` written in `file`, whose child modules' files
/// are found in `dir`.
fn read_file(file: &Path, path: ModPath, dir: &Path, modules: &mut BTreeMap<ModPath, Module>) {
    let text = fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    read_items(&ast.items, path, file, dir, modules);
}

fn read_items(
    items: &[syn::Item],
    path: ModPath,
    file: &Path,
    dir: &Path,
    modules: &mut BTreeMap<ModPath, Module>,
) {
    let mut module = Module {
        file: file.to_owned(),
        ..Module::default()
    };
    // Children are read after this module is complete, so that a child's
    // `super::` resolves against its parent's bindings.
    let mut children = Vec::new();
    for item in items {
        if cfg_test(item_attrs(item)) {
            continue;
        }
        match item {
            syn::Item::Mod(m) => {
                let name = m.ident.to_string();
                module.children.insert(name.clone());
                scan_tokens(attr_tokens(&m.attrs), &path, &mut module.paths);
                children.push((name, m));
            }
            syn::Item::Use(u) => {
                scan_tokens(u.to_token_stream(), &path, &mut module.paths);
                bind_use(&u.tree, None, &path, &mut module.bindings);
            }
            other => scan_tokens(other.to_token_stream(), &path, &mut module.paths),
        }
    }
    // A bare `use child::X` names a child module, once the children are
    // known; any other bare name is another crate's (`std`).
    let relative = |target: &mut ModPath| -> bool {
        if target.first().is_none_or(|f| f != BARE) {
            return true;
        }
        if !target.get(1).is_some_and(|f| module.children.contains(f)) {
            return false;
        }
        target.splice(..1, path.iter().cloned());
        true
    };
    module.bindings.retain(|_, target| relative(target));
    module.paths.retain_mut(|(target, _)| relative(target));
    let at = path.clone();
    modules.insert(path.clone(), module);
    for (name, m) in children {
        let mut child = at.clone();
        child.push(name.clone());
        match &m.content {
            Some((_, items)) => {
                read_items(items, child, file, &dir.join(&name), modules);
            }
            None => {
                let file = child_file(m, &name, dir);
                // `x/mod.rs` and `x.rs` both keep their children in `x/`.
                let child_dir = match file.file_name().and_then(|f| f.to_str()) {
                    Some("mod.rs") => file.parent().unwrap().to_owned(),
                    _ => dir.join(&name),
                };
                read_file(&file, child, &child_dir, modules);
            }
        }
    }
}

/// The file of `mod name;` declared in a module whose children live in `dir`.
fn child_file(m: &syn::ItemMod, name: &str, dir: &Path) -> PathBuf {
    for attr in m.attrs.iter().filter(|a| a.path().is_ident("path")) {
        if let syn::Meta::NameValue(syn::MetaNameValue {
            value:
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }),
            ..
        }) = &attr.meta
        {
            // `#[path]` on a declaration in `lib.rs` or `mod.rs` is relative
            // to that file's directory, which is `dir` for the crate root.
            return dir.join(s.value());
        }
    }
    let flat = dir.join(format!("{name}.rs"));
    if flat.exists() {
        flat
    } else {
        dir.join(name).join("mod.rs")
    }
}

/// Marks a `use` path that starts with a bare name, resolved once the
/// module's children are known.
const BARE: &str = "\0bare";

/// Records the names `tree` binds in `bindings`, each to its absolute
/// path; `prefix` is the path read so far, `None` before its first segment.
fn bind_use(
    tree: &syn::UseTree,
    prefix: Option<ModPath>,
    at: &ModPath,
    bindings: &mut BTreeMap<String, ModPath>,
) {
    let extend = |segment: String| -> ModPath {
        match prefix.clone() {
            None => absolute(&segment, at).unwrap_or_else(|| vec![BARE.to_owned(), segment]),
            Some(mut path) => {
                if segment == "super" {
                    path.pop();
                } else {
                    path.push(segment);
                }
                path
            }
        }
    };
    match tree {
        syn::UseTree::Path(p) => {
            let path = extend(p.ident.to_string());
            bind_use(&p.tree, Some(path), at, bindings);
        }
        // `use a::b::{self}` binds `b`.
        syn::UseTree::Name(n) if n.ident == "self" => {
            if let Some(path) = prefix {
                if let Some(name) = path.last() {
                    bindings.insert(name.clone(), path.clone());
                }
            }
        }
        syn::UseTree::Name(n) => {
            bindings.insert(n.ident.to_string(), extend(n.ident.to_string()));
        }
        syn::UseTree::Rename(r) => {
            bindings.insert(r.rename.to_string(), extend(r.ident.to_string()));
        }
        syn::UseTree::Group(g) => {
            for tree in &g.items {
                bind_use(tree, prefix.clone(), at, bindings);
            }
        }
        syn::UseTree::Glob(_) => {}
    }
}

/// The absolute path a first segment `crate`, `super` or `self` stands for
/// in module `at`; `None` for any other name.
fn absolute(first: &str, at: &ModPath) -> Option<ModPath> {
    match first {
        "crate" => Some(Vec::new()),
        "self" => Some(at.clone()),
        "super" => Some(at[..at.len().saturating_sub(1)].to_vec()),
        _ => None,
    }
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::ExternCrate(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::ForeignMod(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::TraitAlias(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Union(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// Whether the attributes include `#[cfg(test)]`.
fn cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr
                .parse_args::<syn::Ident>()
                .is_ok_and(|ident| ident == "test")
    })
}

fn attr_tokens(attrs: &[syn::Attribute]) -> TokenStream {
    attrs.iter().map(ToTokens::to_token_stream).collect()
}

/// Records every crate path in `tokens`, written in module `at`, with its
/// text. A path is `crate`, `$crate`, `super` or `self` followed by `::`;
/// a brace group after a `::` is a use tree, each of its branches a path.
fn scan_tokens(tokens: TokenStream, at: &ModPath, paths: &mut Vec<(ModPath, String)>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            TokenTree::Group(g) => scan_tokens(g.stream(), at, paths),
            TokenTree::Ident(ident) if is_path_sep(&tokens, i + 1) => {
                let first = ident.to_string();
                if let Some(start) = absolute(&first, at) {
                    let text = if i > 0 && is_punct(&tokens[i - 1], '$') {
                        format!("${first}")
                    } else {
                        first
                    };
                    i = read_path(&tokens, i + 3, start, text, paths);
                    continue;
                }
                // A `use` of a bare name: maybe a child module.
                if i > 0 && matches!(&tokens[i - 1], TokenTree::Ident(u) if u == "use") {
                    let start = vec![BARE.to_owned(), ident.to_string()];
                    i = read_path(&tokens, i + 3, start, ident.to_string(), paths);
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
}

/// Reads the rest of a path from `tokens[i]` (just past a `::`), having
/// read `prefix` (spelled `text`); records it and returns the index after it.
fn read_path(
    tokens: &[TokenTree],
    mut i: usize,
    mut prefix: ModPath,
    mut text: String,
    paths: &mut Vec<(ModPath, String)>,
) -> usize {
    loop {
        match tokens.get(i) {
            Some(TokenTree::Ident(ident)) => {
                let segment = ident.to_string();
                text.push_str("::");
                text.push_str(&segment);
                match segment.as_str() {
                    "super" => {
                        prefix.pop();
                    }
                    // `use a::{self}` names `a`.
                    "self" => {}
                    _ => prefix.push(segment),
                }
                i += 1;
                if is_path_sep(tokens, i) {
                    i += 2;
                    continue;
                }
                paths.push((prefix, text));
                return i;
            }
            Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Brace => {
                // `prefix::{a::B, c}`: each branch is a path of its own.
                let inner: Vec<TokenTree> = g.stream().into_iter().collect();
                for branch in inner.split(|t| is_punct(t, ',')) {
                    if branch.is_empty() {
                        continue;
                    }
                    read_path(branch, 0, prefix.clone(), text.clone(), paths);
                }
                return i + 1;
            }
            // `prefix::*`, or a path ending in `::<...>`: the prefix is what
            // it names.
            _ => {
                paths.push((prefix, text));
                return i;
            }
        }
    }
}

fn is_punct(token: &TokenTree, c: char) -> bool {
    matches!(token, TokenTree::Punct(p) if p.as_char() == c)
}

/// Whether `tokens[i..]` starts with `::`.
fn is_path_sep(tokens: &[TokenTree], i: usize) -> bool {
    matches!(
        (tokens.get(i), tokens.get(i + 1)),
        (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
            if a.as_char() == ':' && b.as_char() == ':' && a.spacing() == proc_macro2::Spacing::Joint
    )
}

/// The module that defines what the absolute `path` names: child modules
/// are followed, and so are the names modules import.
fn resolve(modules: &BTreeMap<ModPath, Module>, path: &[String], depth: usize) -> ModPath {
    let mut at: ModPath = Vec::new();
    for (i, segment) in path.iter().enumerate() {
        let Some(module) = modules.get(&at) else {
            return at;
        };
        if module.children.contains(segment) {
            at.push(segment.clone());
            continue;
        }
        match module.bindings.get(segment) {
            // A chain of re-exports longer than any real one is a loop.
            Some(target) if depth < 32 => {
                let mut through = target.clone();
                through.extend_from_slice(&path[i + 1..]);
                return resolve(modules, &through, depth + 1);
            }
            _ => return at,
        }
    }
    at
}

/// An edge `from -> to` with the paths that make it, as written.
type Edges = BTreeMap<(String, String), BTreeSet<String>>;

/// The edges between modules that are not each other's ancestor or
/// descendant, named by their `::`-joined paths (`crate` for the root).
fn module_edges(modules: &BTreeMap<ModPath, Module>) -> Edges {
    let mut edges = Edges::new();
    for (from, module) in modules {
        for (path, text) in &module.paths {
            let to = resolve(modules, path, 0);
            if to.starts_with(from) || from.starts_with(&to) {
                continue;
            }
            edges
                .entry((name(from), name(&to)))
                .or_default()
                .insert(format!("{text} in {}", module.file.display()));
        }
    }
    edges
}

fn name(path: &ModPath) -> String {
    if path.is_empty() {
        "crate".to_owned()
    } else {
        path.join("::")
    }
}

/// The strongly connected components of more than one node (Tarjan's
/// algorithm), each sorted, in a stable order.
fn cycles<'a>(edges: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<Vec<String>> {
    let mut succ: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges {
        succ.entry(from).or_default().push(to);
        succ.entry(to).or_default();
    }
    struct Tarjan<'a, 'g> {
        succ: &'g BTreeMap<&'a str, Vec<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Tarjan<'a, '_> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for &w in &self.succ[v] {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                loop {
                    let w = self.stack.pop().unwrap();
                    self.on_stack.remove(w);
                    component.push(w.to_owned());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut tarjan = Tarjan {
        succ: &succ,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for &v in succ.keys() {
        if !tarjan.index.contains_key(v) {
            tarjan.visit(v);
        }
    }
    tarjan.found.sort();
    tarjan.found
}

fn core_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../devmm/src")
}

fn binding_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../devmm-python/src")
}

/// Fails, naming each cycle and the edges inside it, if the crate whose
/// sources are in `src` (rooted at `lib.rs`) has a module cycle.
fn assert_no_module_cycle(src: &Path, crate_name: &str) {
    let modules = read_crate(&src.join("lib.rs"));
    let edges = module_edges(&modules);
    let found = cycles(edges.keys().map(|(a, b)| (a.as_str(), b.as_str())));
    let mut report = String::new();
    for component in &found {
        report.push_str(&format!(
            "a cycle of {} modules: {}\n",
            component.len(),
            component.join(", ")
        ));
        for ((from, to), via) in &edges {
            if component.contains(from) && component.contains(to) {
                let via: Vec<&str> = via.iter().map(String::as_str).collect();
                report.push_str(&format!("  {from} -> {to}: {}\n", via.join("; ")));
            }
        }
    }
    assert!(
        found.is_empty(),
        "{crate_name} has module cycles:\n{report}"
    );
}

#[test]
fn the_core_crate_has_no_module_cycle() {
    assert_no_module_cycle(&core_src(), "devmm/src");
}

/// The binding crate (`devmm-python/src`) is held to the same rule.
#[test]
fn the_binding_crate_has_no_module_cycle() {
    assert_no_module_cycle(&binding_src(), "devmm-python/src");
}

/// The `.rs` files under `src` that the walk from `lib.rs` did not reach.
fn files_not_read(src: &Path, modules: &BTreeMap<ModPath, Module>) -> Vec<String> {
    let read: BTreeSet<PathBuf> = modules
        .values()
        .map(|m| m.file.canonicalize().unwrap())
        .collect();
    let mut missed = Vec::new();
    let mut dirs = vec![src.to_owned()];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs")
                && !read.contains(&path.canonicalize().unwrap())
            {
                missed.push(path.display().to_string());
            }
        }
    }
    missed
}

/// Every source file is a module the walk reached, so no file's uses go
/// unchecked (a missed `#[path]`, a module declared in a way not followed).
#[test]
fn every_source_file_is_read() {
    let modules = read_crate(&core_src().join("lib.rs"));
    let missed = files_not_read(&core_src(), &modules);
    assert!(
        missed.is_empty(),
        "files not reached from lib.rs: {missed:?}"
    );
    // The walk finds the modules it should, and resolves through re-exports.
    assert!(modules.contains_key(&vec!["runtime".to_owned(), "cuda".to_owned()]));
    let device = resolve(&modules, &["Device".to_owned()], 0);
    assert_eq!(device, vec!["device".to_owned()]);
}

/// The same for the binding crate.
#[test]
fn every_binding_source_file_is_read() {
    let modules = read_crate(&binding_src().join("lib.rs"));
    let missed = files_not_read(&binding_src(), &modules);
    assert!(
        missed.is_empty(),
        "files not reached from devmm-python/src/lib.rs: {missed:?}"
    );
    assert!(modules.contains_key(&vec!["tensor".to_owned()]));
}

#[test]
fn the_cycle_finder_finds_cycles() {
    let acyclic = [("a", "b"), ("b", "c"), ("a", "c"), ("d", "a")];
    assert!(cycles(acyclic).is_empty());
    let cyclic = [
        ("a", "b"),
        ("b", "c"),
        ("c", "a"),
        ("c", "d"),
        ("d", "e"),
        ("e", "d"),
        ("f", "a"),
    ];
    assert_eq!(cycles(cyclic), vec![vec!["a", "b", "c"], vec!["d", "e"]]);
}

#[test]
fn paths_are_read_from_use_trees_and_code() {
    let file = syn::parse_file(
        "use crate::a::{B, c::{D, E as F}};
         use super::g::H;
         mod child {}
         use child::Item;
         macro_rules! m { () => { $crate::m::N } }
         fn f() { self::child::x(); crate::p::q::<u8>() }",
    )
    .unwrap();
    let at = vec!["here".to_owned(), "mod".to_owned()];
    let mut paths = Vec::new();
    let mut bindings = BTreeMap::new();
    for item in &file.items {
        scan_tokens(item.to_token_stream(), &at, &mut paths);
        if let syn::Item::Use(u) = item {
            bind_use(&u.tree, None, &at, &mut bindings);
        }
    }
    let texts: Vec<&str> = paths.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(
        texts,
        [
            "crate::a::B",
            "crate::a::c::D",
            "crate::a::c::E",
            "super::g::H",
            "child::Item",
            "$crate::m::N",
            "self::child::x",
            "crate::p::q",
        ]
    );
    assert_eq!(bindings["F"], ["a", "c", "E"]);
    assert_eq!(bindings["H"], ["here", "g", "H"]);
    assert_eq!(bindings["Item"], [BARE, "child", "Item"]);
}
