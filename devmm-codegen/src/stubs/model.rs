//! What the stubs describe, read from the PyO3 attributes of a crate.

use std::collections::BTreeSet;

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use quote::ToTokens;
use syn::punctuated::Punctuated;
use syn::{Attribute, Expr, FnArg, ImplItem, Item, Lit, Meta, Pat, ReturnType, Stmt, Token};

use super::block_macros::BlockMacros;
use super::types::{Names, Position};
use super::StubError;

/// A whole extension module.
#[derive(Default)]
pub(super) struct Crate {
    pub(super) names: Names,
    pub(super) classes: Vec<Class>,
    pub(super) functions: Vec<Function>,
    pub(super) exceptions: Vec<Exception>,
    pub(super) constants: Vec<(String, String)>,
    pub(super) int_enums: Vec<IntEnum>,
    pub(super) protocols: Vec<Protocol>,
    /// Classes defined in Python that Rust types convert to, as
    /// `(module, class)`: the stub imports them.
    pub(super) python_classes: BTreeSet<(String, String)>,
    /// The `macro_rules!` that write a `#[pymethods]` block.
    block_macros: BlockMacros,
}

/// A structural type that exists only in the stubs, declared by a doc line
/// ``Python protocol: `_Name(attr: type, ...)` doc`` on any struct, enum or
/// type alias: a `typing.Protocol` whose read-only attributes are those
/// listed, so an annotation can name a third-party type (`torch.dtype`)
/// without the stubs importing its package. Its name is private (`_`), as
/// nothing of that name exists at run time.
pub(super) struct Protocol {
    pub(super) name: String,
    pub(super) doc: String,
    /// `(attribute, annotation)`, in the order written.
    pub(super) attributes: Vec<(String, String)>,
}

/// A plain Rust enum the extension exposes as an `enum.IntEnum` it builds
/// at run time (marked by a doc line ``Python enum: `Name` ``, in the
/// extension or in a core file passed with it): members are the variants
/// in SCREAMING_SNAKE_CASE with their discriminants; the doc is the enum's
/// first paragraph.
pub(super) struct IntEnum {
    pub(super) name: String,
    pub(super) doc: String,
    pub(super) members: Vec<(String, String)>,
}

/// A `#[pyclass]` with the members its `#[pymethods]` define.
pub(super) struct Class {
    rust: String,
    /// The source file that defines it, for errors found once every file is read.
    file: String,
    pub(super) name: String,
    pub(super) base: Option<String>,
    pub(super) doc: String,
    /// Dunder methods PyO3 generates from the class options (`eq`, `hash`, `eq_int`).
    pub(super) generated: Vec<&'static str>,
    /// Variant names of a `#[pyclass]` enum.
    pub(super) variants: Vec<String>,
    /// Whether Python code may subclass it (`#[pyclass(subclass)]`).
    pub(super) subclassable: bool,
    /// Whether its instances have a layout of their own (a root class, or
    /// one with fields): Python cannot mix it with another such base.
    pub(super) disjoint: bool,
    /// Whether the package's Python code declares its constructor's
    /// parameters as its frozen dataclass fields (a doc line
    /// ``Python dataclass: `frozen` ``): the stub gives it the dataclass
    /// surface a type checker reads (`__dataclass_fields__`,
    /// `__match_args__`).
    pub(super) dataclass: bool,
    pub(super) members: Vec<Member>,
}

/// A class member.
pub(super) enum Member {
    Method(Function),
    /// A `#[classattr]`: an attribute of the class itself.
    ClassAttr {
        name: String,
        ty: String,
        doc: String,
    },
    Property {
        name: String,
        ty: String,
        doc: String,
        settable: Option<String>,
    },
}

/// How a function is bound.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Module,
    Instance,
    Static,
    Class,
    Constructor,
}

/// A function or method.
pub(super) struct Function {
    pub(super) name: String,
    pub(super) kind: Kind,
    pub(super) params: Vec<Param>,
    pub(super) ret: String,
    pub(super) doc: String,
}

/// One parameter, as PyO3's `signature` spells it.
pub(super) enum Param {
    Plain {
        name: String,
        ty: String,
        default: Option<String>,
    },
    KeywordOnlyMarker,
    PositionalOnlyMarker,
    Args(String),
    Kwargs(String),
}

/// A `create_exception!(module, Name, Base, "doc")`.
pub(super) struct Exception {
    pub(super) name: String,
    pub(super) base: String,
    pub(super) doc: String,
}

/// `#[pymethods]` that fill type slots (the garbage collector's, the buffer
/// protocol's) and have no Python-visible attribute, so no stub.
const C_SLOTS: [&str; 4] = [
    "__traverse__",
    "__clear__",
    "__getbuffer__",
    "__releasebuffer__",
];

fn err(file: &str, message: impl Into<String>) -> StubError {
    StubError {
        file: file.to_owned(),
        message: message.into(),
    }
}

fn tokens(node: &impl ToTokens) -> String {
    node.to_token_stream().to_string()
}

/// The doc lines addressed to the stub generator rather than to readers.
const DIRECTIVES: [&str; 5] = [
    "Python type:",
    "Python enum:",
    "Python protocol:",
    "Python class:",
    "Python dataclass:",
];

/// The doc comment, without the lines addressed to the stub generator.
pub(super) fn doc_of(attrs: &[Attribute]) -> String {
    let kept: Vec<String> = doc_lines(attrs)
        .map(|line| line.strip_prefix(' ').map(str::to_owned).unwrap_or(line))
        .filter(|l| !DIRECTIVES.iter().any(|d| l.starts_with(d)))
        .collect();
    kept.join("\n").trim().to_owned()
}

/// Every doc line, as written.
fn doc_lines(attrs: &[Attribute]) -> impl Iterator<Item = String> + '_ {
    attrs.iter().filter_map(|attr| {
        let Meta::NameValue(nv) = &attr.meta else {
            return None;
        };
        if !nv.path.is_ident("doc") {
            return None;
        }
        let Expr::Lit(syn::ExprLit {
            lit: Lit::Str(s), ..
        }) = &nv.value
        else {
            return None;
        };
        Some(s.value())
    })
}

/// The `` `X` `` of a doc line ``DIRECTIVE `X` ``, if any.
fn directive(attrs: &[Attribute], directive: &str) -> Option<String> {
    doc_lines(attrs).find_map(|line| {
        let rest = line.trim().strip_prefix(directive)?.trim();
        Some(rest.trim_matches('`').to_owned())
    })
}

/// The annotation of a ``Python type: `X` `` doc line, if any.
pub(super) fn declared_type(attrs: &[Attribute]) -> Option<String> {
    directive(attrs, "Python type:")
}

/// The Python name of an ``Python enum: `Name` `` doc line, if any.
fn declared_int_enum(attrs: &[Attribute]) -> Option<String> {
    directive(attrs, "Python enum:")
}

/// The `(module, class)` of a ``Python class: `module.Class` `` doc line,
/// if any: the Rust type converts to a class defined in Python.
fn declared_python_class(
    file: &str,
    attrs: &[Attribute],
) -> Result<Option<(String, String)>, StubError> {
    let Some(path) = directive(attrs, "Python class:") else {
        return Ok(None);
    };
    match path.rsplit_once('.') {
        Some((module, class)) if !module.is_empty() && !class.is_empty() => {
            Ok(Some((module.to_owned(), class.to_owned())))
        }
        _ => Err(err(
            file,
            format!(
                "doc line \"Python class: `{path}`\": write ``Python class: `module.Class` ``, \
                 the module the stub imports the class from"
            ),
        )),
    }
}

/// Whether a ``Python dataclass: `frozen` `` doc line (perhaps followed by
/// a note saying where) marks the class `name` as a frozen dataclass (the
/// only kind the package's Python code declares).
fn declared_dataclass(file: &str, name: &str, attrs: &[Attribute]) -> Result<bool, StubError> {
    let Some(line) = doc_lines(attrs).find_map(|line| {
        let rest = line.trim().strip_prefix("Python dataclass:")?;
        Some(rest.trim().to_owned())
    }) else {
        return Ok(false);
    };
    let kind = line.strip_prefix('`').and_then(|rest| rest.split_once('`'));
    match kind {
        Some(("frozen", _)) => Ok(true),
        _ => Err(err(
            file,
            format!(
                "class {name}: doc line \"Python dataclass: {line}\": write ``Python dataclass: `frozen` ``, \
                 for a class whose Python code declares its constructor's parameters as frozen dataclass fields"
            ),
        )),
    }
}

/// The protocols the ``Python protocol: ...`` doc lines of `attrs` declare.
fn declared_protocols(file: &str, attrs: &[Attribute]) -> Result<Vec<Protocol>, StubError> {
    doc_lines(attrs)
        .filter_map(|line| {
            let rest = line.trim().strip_prefix("Python protocol:")?.trim().to_owned();
            Some(protocol(&rest).ok_or_else(|| {
                err(
                    file,
                    format!(
                        "doc line \"Python protocol: {rest}\": write ``Python protocol: `_Name(attr: type, ...)` doc``, \
                         with a private (`_`) name and at least one attribute: the protocol exists only in the stubs"
                    ),
                )
            }))
        })
        .collect()
}

/// `` `_Name(attr: type, ...)` doc`` as a protocol, or `None` when malformed.
fn protocol(text: &str) -> Option<Protocol> {
    let (signature, doc) = text.strip_prefix('`')?.split_once('`')?;
    let (name, attributes) = signature.strip_suffix(')')?.split_once('(')?;
    let name = name.trim();
    let identifier = |s: &str| {
        !s.is_empty()
            && !s.starts_with(|c: char| c.is_ascii_digit())
            && s.chars().all(|c| c.is_alphanumeric() || c == '_')
    };
    if !name.starts_with('_') || !identifier(name) {
        return None;
    }
    let attributes = attributes
        .split(',')
        .map(|attribute| {
            let (attribute, ty) = attribute.split_once(':')?;
            let (attribute, ty) = (attribute.trim(), ty.trim());
            (identifier(attribute) && !ty.is_empty()).then(|| (attribute.to_owned(), ty.to_owned()))
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Protocol {
        name: name.to_owned(),
        doc: doc.trim().to_owned(),
        attributes,
    })
}

/// `CudaHost` → `CUDA_HOST`: an enum member's Python name.
fn screaming_snake(ident: &syn::Ident) -> String {
    let mut out = String::new();
    for (i, c) in ident.to_string().chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push('_');
        }
        out.extend(c.to_uppercase());
    }
    out
}

/// The attribute `#[name]` or `#[path::name]` (`#[pyo3::pymethods]`, as a
/// macro writes it), if it is there.
fn find_attr<'a>(attrs: &'a [Attribute], name: &str) -> Option<&'a Attribute> {
    attrs
        .iter()
        .find(|a| a.path().segments.last().is_some_and(|s| s.ident == name))
}

fn has_attr(attrs: &[Attribute], name: &str) -> bool {
    find_attr(attrs, name).is_some()
}

/// The options of `#[pyclass(...)]` / `#[pyo3(...)]`, as meta items.
fn options(attr: &Attribute) -> Vec<Meta> {
    match &attr.meta {
        Meta::List(_) => attr
            .parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)
            .map(|p| p.into_iter().collect())
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

fn option_str(metas: &[Meta], key: &str) -> Option<String> {
    metas.iter().find_map(|m| match m {
        Meta::NameValue(nv) if nv.path.is_ident(key) => match &nv.value {
            Expr::Lit(syn::ExprLit {
                lit: Lit::Str(s), ..
            }) => Some(s.value()),
            other => Some(tokens(other)),
        },
        _ => None,
    })
}

fn option_flag(metas: &[Meta], key: &str) -> bool {
    metas
        .iter()
        .any(|m| matches!(m, Meta::Path(p) if p.is_ident(key)))
}

/// The Python name of an identifier (`r#type` → `type`).
fn py_ident(ident: &syn::Ident) -> String {
    let text = ident.to_string();
    text.strip_prefix("r#").unwrap_or(&text).to_owned()
}

/// `#[pyo3(name = "...")]`, if given.
fn renamed(attrs: &[Attribute]) -> Option<String> {
    attrs
        .iter()
        .filter(|a| a.path().is_ident("pyo3"))
        .find_map(|a| option_str(&options(a), "name"))
}

impl Crate {
    /// First pass: the Python spelling of every pyclass and of every type
    /// that declares one.
    pub(super) fn collect_types(&mut self, file: &str, ast: &syn::File) -> Result<(), StubError> {
        for item in &ast.items {
            let (ident, attrs) = match item {
                Item::Macro(m) => {
                    self.block_macros.define(file, m)?;
                    continue;
                }
                Item::Struct(s) => (&s.ident, &s.attrs),
                Item::Enum(e) => (&e.ident, &e.attrs),
                Item::Type(t) => (&t.ident, &t.attrs),
                _ => continue,
            };
            if let Some(attr) = find_attr(attrs, "pyclass") {
                let name = option_str(&options(attr), "name").unwrap_or_else(|| py_ident(ident));
                self.names.insert(file, ident.to_string(), name)?;
            } else if let Some(declared) = declared_type(attrs) {
                self.names.insert(file, ident.to_string(), declared)?;
            } else if let Some((module, class)) = declared_python_class(file, attrs)? {
                self.names.insert(file, ident.to_string(), class.clone())?;
                self.python_classes.insert((module, class));
            } else if let Some(declared) = declared_int_enum(attrs) {
                self.names.insert(file, ident.to_string(), declared)?;
            }
        }
        Ok(())
    }

    /// Second pass: classes, methods, functions, exceptions and constants.
    pub(super) fn collect_items(&mut self, file: &str, ast: &syn::File) -> Result<(), StubError> {
        for item in &ast.items {
            if let Item::Struct(syn::ItemStruct { attrs, .. })
            | Item::Enum(syn::ItemEnum { attrs, .. })
            | Item::Type(syn::ItemType { attrs, .. }) = item
            {
                for protocol in declared_protocols(file, attrs)? {
                    if self.protocols.iter().any(|p| p.name == protocol.name) {
                        return Err(err(
                            file,
                            format!(
                                "protocol {} is declared twice: declare it on one item and name it from the others",
                                protocol.name
                            ),
                        ));
                    }
                    self.protocols.push(protocol);
                }
            }
            match item {
                Item::Struct(s) => {
                    if let Some(attr) = find_attr(&s.attrs, "pyclass") {
                        self.class(
                            file,
                            &s.ident,
                            &s.attrs,
                            attr,
                            Vec::new(),
                            !s.fields.is_empty(),
                        )?;
                    }
                }
                Item::Enum(e) if declared_int_enum(&e.attrs).is_some() => {
                    self.int_enum(file, e)?;
                }
                Item::Enum(e) => {
                    if let Some(attr) = find_attr(&e.attrs, "pyclass") {
                        let variants = e
                            .variants
                            .iter()
                            .map(|v| renamed(&v.attrs).unwrap_or_else(|| py_ident(&v.ident)))
                            .collect();
                        self.class(file, &e.ident, &e.attrs, attr, variants, true)?;
                    }
                }
                Item::Impl(imp) if has_attr(&imp.attrs, "pymethods") => self.methods(file, imp)?,
                Item::Fn(f) if has_attr(&f.attrs, "pyfunction") => {
                    let function = self.function(file, &f.attrs, &f.sig, Kind::Module)?;
                    self.functions.push(function);
                }
                Item::Fn(f) if has_attr(&f.attrs, "pymodule") => {
                    self.constants(file, &f.block.stmts)?
                }
                Item::Macro(m)
                    if m.mac
                        .path
                        .segments
                        .last()
                        .is_some_and(|s| s.ident == "create_exception") =>
                {
                    self.exception(file, &m.mac.tokens)?;
                }
                Item::Macro(m) => {
                    if let Some(expanded) = self.block_macros.expand(file, m)? {
                        self.collect_items(file, &expanded)?;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn int_enum(&mut self, file: &str, e: &syn::ItemEnum) -> Result<(), StubError> {
        let name = declared_int_enum(&e.attrs).unwrap_or_default();
        let members = e
            .variants
            .iter()
            .map(|v| match &v.discriminant {
                Some((_, value)) => Ok((screaming_snake(&v.ident), tokens(value))),
                None => Err(err(
                    file,
                    format!(
                        "IntEnum {name}: variant {} needs an explicit value (`= 1`)",
                        v.ident
                    ),
                )),
            })
            .collect::<Result<_, _>>()?;
        let doc = doc_of(&e.attrs);
        self.int_enums.push(IntEnum {
            name,
            doc: doc.split("\n\n").next().unwrap_or_default().to_owned(),
            members,
        });
        Ok(())
    }

    fn class(
        &mut self,
        file: &str,
        ident: &syn::Ident,
        attrs: &[Attribute],
        pyclass: &Attribute,
        variants: Vec<String>,
        has_fields: bool,
    ) -> Result<(), StubError> {
        let opts = options(pyclass);
        let name = option_str(&opts, "name").unwrap_or_else(|| py_ident(ident));
        let base = match option_str(&opts, "extends") {
            Some(rust) => Some(self.names.get(&rust).ok_or_else(|| {
                err(
                    file,
                    format!("class {name} extends {rust}, which is not a #[pyclass] here"),
                )
            })?),
            None => None,
        };
        let mut generated = Vec::new();
        if option_flag(&opts, "eq") {
            generated.push("__eq__");
        }
        if option_flag(&opts, "hash") {
            generated.push("__hash__");
        }
        if option_flag(&opts, "eq_int") {
            generated.push("__int__");
        }
        let disjoint = base.is_none() || has_fields;
        let dataclass = declared_dataclass(file, &name, attrs)?;
        self.classes.push(Class {
            rust: ident.to_string(),
            file: file.to_owned(),
            name,
            base,
            doc: doc_of(attrs),
            generated,
            variants,
            subclassable: option_flag(&opts, "subclass"),
            disjoint,
            dataclass,
            members: Vec::new(),
        });
        Ok(())
    }

    fn methods(&mut self, file: &str, imp: &syn::ItemImpl) -> Result<(), StubError> {
        let rust = match &*imp.self_ty {
            syn::Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
            _ => None,
        }
        .ok_or_else(|| err(file, format!("#[pymethods] on {}", tokens(&imp.self_ty))))?;
        let mut members = Vec::new();
        for item in &imp.items {
            let ImplItem::Fn(f) = item else { continue };
            // The collector's and the buffer protocol's slots are C-level
            // only: not attributes Python code sees.
            if C_SLOTS.contains(&f.sig.ident.to_string().as_str()) {
                continue;
            }
            let attrs = &f.attrs;
            if has_attr(attrs, "classattr") {
                let ty = match declared_type(attrs) {
                    Some(declared) => declared,
                    None => self.return_type(file, &f.sig.output)?,
                };
                members.push(Member::ClassAttr {
                    name: f.sig.ident.to_string(),
                    ty,
                    doc: doc_of(attrs),
                });
            } else if let Some(getter) = find_attr(attrs, "getter") {
                let name = accessor_name(getter, &f.sig.ident, "get_");
                let ty = match declared_type(attrs) {
                    Some(declared) => declared,
                    None => self.return_type(file, &f.sig.output)?,
                };
                members.push(Member::Property {
                    name,
                    ty,
                    doc: doc_of(attrs),
                    settable: None,
                });
            } else if let Some(setter) = find_attr(attrs, "setter") {
                let name = accessor_name(setter, &f.sig.ident, "set_");
                let value = f
                    .sig
                    .inputs
                    .iter()
                    .filter_map(|a| match a {
                        FnArg::Typed(t) if !self.names.is_python_token(&t.ty) => Some(&t.ty),
                        _ => None,
                    })
                    .next_back()
                    .ok_or_else(|| err(file, format!("setter {name} takes no value")))?;
                let ty = self
                    .names
                    .annotation(value, Position::Argument)
                    .map_err(|m| err(file, m))?;
                let property = members.iter_mut().find_map(|m| match m {
                    Member::Property {
                        name: n, settable, ..
                    } if *n == name => Some(settable),
                    _ => None,
                });
                match property {
                    Some(settable) => *settable = Some(ty),
                    None => {
                        return Err(err(file, format!("setter {name} has no getter before it")))
                    }
                }
            } else {
                let kind = if has_attr(attrs, "new") {
                    Kind::Constructor
                } else if has_attr(attrs, "staticmethod") {
                    Kind::Static
                } else if has_attr(attrs, "classmethod") {
                    Kind::Class
                } else {
                    Kind::Instance
                };
                members.push(Member::Method(self.function(file, attrs, &f.sig, kind)?));
            }
        }
        let class = self
            .classes
            .iter_mut()
            .find(|c| c.rust == rust)
            .ok_or_else(|| {
                err(
                    file,
                    format!("#[pymethods] for {rust}, which is not a #[pyclass] seen so far"),
                )
            })?;
        class.members.extend(members);
        Ok(())
    }

    fn return_type(&self, file: &str, output: &ReturnType) -> Result<String, StubError> {
        match output {
            ReturnType::Default => Ok("None".into()),
            ReturnType::Type(_, ty) => self
                .names
                .annotation(ty, Position::Return)
                .map_err(|m| err(file, m)),
        }
    }

    fn function(
        &self,
        file: &str,
        attrs: &[Attribute],
        sig: &syn::Signature,
        kind: Kind,
    ) -> Result<Function, StubError> {
        let name = match kind {
            Kind::Constructor => "__new__".to_owned(),
            _ => renamed(attrs).unwrap_or_else(|| py_ident(&sig.ident)),
        };
        // The Python-visible arguments: no receiver, no `py: Python`, no `slf`.
        let mut typed = Vec::new();
        for (position, input) in sig.inputs.iter().enumerate() {
            let FnArg::Typed(arg) = input else { continue };
            let Pat::Ident(pat) = &*arg.pat else {
                return Err(err(
                    file,
                    format!("{name}: argument pattern {}", tokens(&arg.pat)),
                ));
            };
            let is_receiver = position == 0
                && kind != Kind::Static
                && kind != Kind::Module
                && (pat.ident == "slf" || pat.ident == "cls" || tokens(&arg.ty).contains("Self"));
            if is_receiver || self.names.is_python_token(&arg.ty) {
                continue;
            }
            typed.push((py_ident(&pat.ident), &*arg.ty));
        }
        let signature = attrs
            .iter()
            .filter(|a| a.path().is_ident("pyo3"))
            .find_map(signature_items);
        let shown = attrs
            .iter()
            .filter(|a| a.path().is_ident("pyo3"))
            .find_map(text_signature)
            .unwrap_or_default();
        let mut params = Vec::new();
        match signature {
            Some(items) => {
                for item in items {
                    params.push(match item {
                        SigItem::Star => Param::KeywordOnlyMarker,
                        SigItem::Slash => Param::PositionalOnlyMarker,
                        SigItem::Args(n) => Param::Args(n),
                        SigItem::Kwargs(n) => Param::Kwargs(n),
                        SigItem::Plain(n, default) => {
                            let ty = typed.iter().find(|(t, _)| *t == n).ok_or_else(|| {
                                err(
                                    file,
                                    format!(
                                        "{name}: signature names {n}, which is not an argument"
                                    ),
                                )
                            })?;
                            Param::Plain {
                                ty: self
                                    .names
                                    .annotation(ty.1, Position::Argument)
                                    .map_err(|m| err(file, format!("{name}: {m}")))?,
                                // A default the signature computes (a core
                                // constant) shows as the text signature
                                // writes it, which a test holds equal.
                                default: match default.as_deref() {
                                    Some("...") => shown_default(&shown, &n).or(default),
                                    _ => default,
                                },
                                name: n,
                            }
                        }
                    });
                }
            }
            None => {
                for (n, ty) in &typed {
                    params.push(Param::Plain {
                        name: n.clone(),
                        ty: self
                            .names
                            .annotation(ty, Position::Argument)
                            .map_err(|m| err(file, format!("{name}: {m}")))?,
                        default: None,
                    });
                }
            }
        }
        let ret = match (kind, declared_type(attrs)) {
            (Kind::Constructor, _) => String::new(),
            (_, Some(declared)) => declared,
            _ => self
                .return_type(file, &sig.output)
                .map_err(|e| err(file, format!("{name}: {}", e.message)))?,
        };
        Ok(Function {
            name,
            kind,
            params,
            ret,
            doc: doc_of(attrs),
        })
    }

    fn exception(&mut self, file: &str, body: &TokenStream) -> Result<(), StubError> {
        let parts = Punctuated::<Expr, Token![,]>::parse_terminated
            .parse2(body.clone())
            .map_err(|e| err(file, format!("create_exception!: {e}")))?;
        let parts: Vec<&Expr> = parts.iter().collect();
        let (Some(name), Some(base)) = (parts.get(1), parts.get(2)) else {
            return Err(err(
                file,
                "create_exception! needs a module, a name and a base",
            ));
        };
        let base = tokens(*base).replace(' ', "");
        let base = base.rsplit("::").next().unwrap_or(&base);
        let doc = match parts.get(3) {
            Some(Expr::Lit(syn::ExprLit {
                lit: Lit::Str(s), ..
            })) => s.value(),
            _ => String::new(),
        };
        self.exceptions.push(Exception {
            name: tokens(*name),
            base: base.strip_prefix("Py").unwrap_or(base).to_owned(),
            doc,
        });
        Ok(())
    }

    /// `m.add("NAME", value)` calls of the `#[pymodule]` function.
    fn constants(&mut self, file: &str, stmts: &[Stmt]) -> Result<(), StubError> {
        for stmt in stmts {
            let Stmt::Expr(expr, _) = stmt else { continue };
            let call = match expr {
                Expr::Try(t) => &*t.expr,
                other => other,
            };
            let Expr::MethodCall(call) = call else {
                continue;
            };
            if call.method != "add" || call.args.len() != 2 {
                continue;
            }
            let Expr::Lit(syn::ExprLit {
                lit: Lit::Str(name),
                ..
            }) = &call.args[0]
            else {
                return Err(err(
                    file,
                    format!("module constant with a computed name: {}", tokens(call)),
                ));
            };
            let value = &call.args[1];
            let ty = match value {
                Expr::Lit(syn::ExprLit { lit: Lit::Str(_), .. }) => "str".to_owned(),
                Expr::Macro(m) if m.mac.path.is_ident("env") || m.mac.path.is_ident("concat") => "str".to_owned(),
                Expr::Call(c) if tokens(&c.func).replace(' ', "") == "String::from" => "str".to_owned(),
                // `py.get_type::<E>()`: an exception class, stubbed from its create_exception!.
                Expr::MethodCall(m) if m.method == "get_type" => continue,
                // `Enum::class(py)?`: an IntEnum class, stubbed from its Rust enum.
                Expr::Try(t) if self.is_int_enum_class(&t.expr) => continue,
                // `Enum::Variant` of a pyclass enum.
                Expr::Path(p) if p.path.segments.len() >= 2 => {
                    let owner = p.path.segments[p.path.segments.len() - 2].ident.to_string();
                    self.names.get(&owner).ok_or_else(|| {
                        err(file, format!("module constant {} is a variant of {owner}, which is not a #[pyclass]", name.value()))
                    })?
                }
                Expr::Struct(s) => {
                    let rust = s.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default();
                    self.names.get(&rust).ok_or_else(|| {
                        err(file, format!("module constant {} of type {rust}, which is not a #[pyclass]", name.value()))
                    })?
                }
                other => {
                    return Err(err(file, format!(
                        "module constant {}: cannot tell the Python type of {}; use a string literal, \
                         String::from(..), or a #[pyclass] value",
                        name.value(),
                        tokens(other)
                    )))
                }
            };
            self.constants.push((name.value(), ty));
        }
        Ok(())
    }
}

impl Crate {
    /// Third pass, once every class has its members: each dataclass's
    /// fields, checked to be its constructor's plain parameters, each read
    /// back by a getter of the class or one of its bases.
    pub(super) fn check_dataclasses(&self) -> Result<(), StubError> {
        for class in self.classes.iter().filter(|c| c.dataclass) {
            let fail = |what: String| {
                err(
                    &class.file,
                    format!("class {} is declared a dataclass, but {what}", class.name),
                )
            };
            let Some(params) = class.constructor() else {
                return Err(fail(
                    "it has no #[new]: its fields are its constructor's parameters".into(),
                ));
            };
            for param in params {
                let Param::Plain { name, .. } = param else {
                    return Err(fail(
                        "its constructor takes `/`, `*`, `*args` or `**kwargs`: each of its \
                         parameters is a field, given by position or by name"
                            .into(),
                    ));
                };
                if !self.has_property(class, name) {
                    return Err(fail(format!(
                        "its field {name} (a constructor parameter) has no #[getter] on it or \
                         its bases: a dataclass reads each field back by name"
                    )));
                }
            }
        }
        Ok(())
    }

    /// Whether `class` or one of its bases has the property `name`.
    fn has_property(&self, class: &Class, name: &str) -> bool {
        let mut next = Some(class);
        while let Some(class) = next {
            if class.property(name) {
                return true;
            }
            next = class
                .base
                .as_ref()
                .and_then(|base| self.classes.iter().find(|c| c.name == *base));
        }
        false
    }

    /// Whether `expr` is `Owner::class(..)` for an IntEnum `Owner`.
    fn is_int_enum_class(&self, expr: &Expr) -> bool {
        let Expr::Call(call) = expr else {
            return false;
        };
        let Expr::Path(path) = &*call.func else {
            return false;
        };
        let segments: Vec<String> = path
            .path
            .segments
            .iter()
            .map(|s| s.ident.to_string())
            .collect();
        match segments.as_slice() {
            [.., owner, method] if method == "class" => self
                .names
                .get(owner)
                .is_some_and(|python| self.int_enums.iter().any(|e| e.name == python)),
            _ => false,
        }
    }
}

impl Class {
    /// The parameters of its `#[new]`, if it has one.
    pub(super) fn constructor(&self) -> Option<&[Param]> {
        self.members.iter().find_map(|member| match member {
            Member::Method(f) if f.kind == Kind::Constructor => Some(&f.params[..]),
            _ => None,
        })
    }

    /// Whether it defines the property `name` itself.
    fn property(&self, name: &str) -> bool {
        self.members
            .iter()
            .any(|member| matches!(member, Member::Property { name: n, .. } if n == name))
    }
}

use syn::parse::Parser;

fn accessor_name(attr: &Attribute, ident: &syn::Ident, prefix: &str) -> String {
    if let Meta::List(list) = &attr.meta {
        if let Ok(name) = syn::parse2::<syn::Ident>(list.tokens.clone()) {
            return py_ident(&name);
        }
    }
    let name = py_ident(ident);
    name.strip_prefix(prefix).map(str::to_owned).unwrap_or(name)
}

/// The text of `#[pyo3(text_signature = "...")]`, if this attribute has one.
fn text_signature(attr: &Attribute) -> Option<String> {
    let Meta::List(list) = &attr.meta else {
        return None;
    };
    let mut iter = list.tokens.clone().into_iter();
    while let Some(tree) = iter.next() {
        if !matches!(&tree, TokenTree::Ident(i) if i == "text_signature") {
            continue;
        }
        iter.next(); // `=`
        let Some(TokenTree::Literal(text)) = iter.next() else {
            return None;
        };
        let Lit::Str(text) = Lit::new(text) else {
            return None;
        };
        return Some(text.value());
    }
    None
}

/// The default `text` (a text signature, `"($self, a, *, b=64)"`) shows
/// for the parameter `name`, when it shows one.
fn shown_default(text: &str, name: &str) -> Option<String> {
    let inside = text.trim().strip_prefix('(')?.strip_suffix(')')?;
    inside.split(',').find_map(|param| {
        let (n, default) = param.split_once('=')?;
        (n.trim() == name).then(|| default.trim().to_owned())
    })
}

/// One item of a PyO3 `signature = (...)`.
enum SigItem {
    Plain(String, Option<String>),
    Star,
    Slash,
    Args(String),
    Kwargs(String),
}

/// The items of `#[pyo3(signature = (...))]`, if this attribute has one.
fn signature_items(attr: &Attribute) -> Option<Vec<SigItem>> {
    let Meta::List(list) = &attr.meta else {
        return None;
    };
    let mut iter = list.tokens.clone().into_iter();
    while let Some(tree) = iter.next() {
        if !matches!(&tree, TokenTree::Ident(i) if i == "signature") {
            continue;
        }
        iter.next(); // `=`
        let Some(TokenTree::Group(group)) = iter.next() else {
            return None;
        };
        if group.delimiter() != Delimiter::Parenthesis {
            return None;
        }
        let mut items = Vec::new();
        let mut current: Vec<TokenTree> = Vec::new();
        for tree in group
            .stream()
            .into_iter()
            .chain(std::iter::once(TokenTree::Punct(proc_macro2::Punct::new(
                ',',
                proc_macro2::Spacing::Alone,
            ))))
        {
            if matches!(&tree, TokenTree::Punct(p) if p.as_char() == ',') {
                if let Some(item) = sig_item(&current) {
                    items.push(item);
                }
                current.clear();
            } else {
                current.push(tree);
            }
        }
        return Some(items);
    }
    None
}

fn sig_item(trees: &[TokenTree]) -> Option<SigItem> {
    let punct = |t: &TokenTree, c: char| matches!(t, TokenTree::Punct(p) if p.as_char() == c);
    let ident = |t: &TokenTree| match t {
        TokenTree::Ident(i) => {
            let s = i.to_string();
            Some(s.strip_prefix("r#").unwrap_or(&s).to_owned())
        }
        _ => None,
    };
    match trees {
        [] => None,
        [t] if punct(t, '*') => Some(SigItem::Star),
        [t] if punct(t, '/') => Some(SigItem::Slash),
        [a, b, n] if punct(a, '*') && punct(b, '*') => Some(SigItem::Kwargs(ident(n)?)),
        [a, n] if punct(a, '*') => Some(SigItem::Args(ident(n)?)),
        [n] => Some(SigItem::Plain(ident(n)?, None)),
        [n, eq, rest @ ..] if punct(eq, '=') => {
            Some(SigItem::Plain(ident(n)?, Some(python_default(rest))))
        }
        _ => None,
    }
}

/// A default as Python writes it, when it is a plain literal (or a checked
/// count, `Count::of(64)`, which Python sees as the int); `...` otherwise.
fn python_default(trees: &[TokenTree]) -> String {
    let text: String = trees.iter().map(|t| t.to_string()).collect();
    match text.as_str() {
        "None" => "None".into(),
        "true" => "True".into(),
        "false" => "False".into(),
        t if t.parse::<i64>().is_ok() => t.into(),
        t if t.starts_with('"') && t.ends_with('"') => format!("'{}'", &t[1..t.len() - 1]),
        t => match t
            .strip_prefix("Count::of(")
            .and_then(|rest| rest.strip_suffix(')'))
        {
            Some(count) if count.parse::<u64>().is_ok() => count.into(),
            _ => "...".into(),
        },
    }
}
