//! Checks a parsed `#[memory_resource]` and turns it into the model the
//! expansion works from. Every problem is reported, each on its own token.

use proc_macro2::Span;
use quote::ToTokens;
use syn::{
    Attribute, Expr, ImplItem, ImplItemFn, ItemImpl, ItemStruct, Lit, LitBool, LitInt, LitStr,
    Member, Type,
};

use super::parse::{Arg, Args};
use super::signature::{check_signature, METHODS};
use crate::diagnostics::Errors;
use crate::names;

const KEYS: &str = "device, alignment, stream_ordered, ledger, debug, name";

/// An adaptor's struct: `impl Adaptor` is generated for it.
pub(crate) struct AdaptorStruct {
    /// The struct with the `#[upstream]` markers removed.
    pub(crate) item: ItemStruct,
    pub(crate) field: Member,
    pub(crate) ty: Type,
}

/// An impl block: `impl MemoryResource` is generated from it.
pub(crate) struct ImplModel {
    /// The impl header (generics, self type); its items are below.
    pub(crate) header: ItemImpl,
    /// Items that stay in the inherent impl.
    pub(crate) inherent: Vec<ImplItem>,
    /// Trait methods the user wrote, moved into the trait impl as written.
    pub(crate) written: Vec<ImplItemFn>,
    pub(crate) kind: Kind,
}

pub(crate) enum Kind {
    /// Forward everything not written to the `#[upstream]` field.
    Adaptor,
    Resource(Box<Resource>),
}

/// A resource of the user's own.
pub(crate) struct Resource {
    pub(crate) allocate: UserFn,
    pub(crate) deallocate: UserFn,
    /// `DeviceType` variant and ordinal, or `None` when `fn device` is written.
    pub(crate) device: Option<(&'static str, u32)>,
    /// `None` when `fn guaranteed_alignment` is written.
    pub(crate) alignment: Option<LitInt>,
    pub(crate) stream_ordered: Option<LitBool>,
    pub(crate) tracking: Tracking,
    /// The name in resource chains (`name = ".."`); the type's by default.
    pub(crate) name: Option<LitStr>,
}

/// The user's `allocate` or `deallocate`, kept as an inherent method.
pub(crate) struct UserFn {
    pub(crate) item: ImplItemFn,
    pub(crate) takes_stream: bool,
}

/// When the ledger bookkeeping runs.
pub(crate) enum Tracking {
    /// Under `debug_assertions` (the default).
    Debug(Member),
    /// Always (`debug = true`).
    Always(Member),
    /// Never (`debug = false`).
    Never,
}

fn is_upstream(attr: &Attribute) -> bool {
    attr.path().is_ident("upstream")
}

/// The struct with its `#[upstream]` markers removed: also the fallback
/// emitted when the struct has errors, so its uses do not fail as well.
pub(crate) fn strip_upstream(item: &ItemStruct) -> ItemStruct {
    let mut item = item.clone();
    for field in item.fields.iter_mut() {
        field.attrs.retain(|a| !is_upstream(a));
    }
    item
}

/// Checks an adaptor's struct.
pub(crate) fn adaptor_struct(args: &Args, item: &ItemStruct) -> syn::Result<AdaptorStruct> {
    let mut errors = Errors::default();
    for arg in &args.args {
        errors.spanned(
            &arg.key,
            format_args!(
                "on a struct, #[memory_resource] takes no arguments: it marks an adaptor, whose \
                 device and alignment are its upstream's; put `{}` on a resource's impl block",
                arg.key
            ),
        );
    }
    let mut upstream = None;
    for (index, field) in item.fields.iter().enumerate() {
        for attr in field.attrs.iter().filter(|a| is_upstream(a)) {
            if let Err(e) = attr.meta.require_path_only() {
                errors.push(syn::Error::new(
                    e.span(),
                    "#[upstream] takes no arguments: write `#[upstream]`",
                ));
            }
            if upstream.is_some() {
                errors.spanned(
                    attr,
                    "duplicate #[upstream]: an adaptor forwards to exactly one upstream; \
                     remove this marker",
                );
                continue;
            }
            let member = match &field.ident {
                Some(ident) => Member::Named(ident.clone()),
                None => Member::Unnamed(index.into()),
            };
            upstream = Some((member, field.ty.clone()));
        }
    }
    if upstream.is_none() {
        errors.spanned(
            &item.ident,
            format_args!(
                "adaptor `{}` has no #[upstream] field: mark the field holding the resource it \
                 forwards to with `#[upstream]`",
                item.ident
            ),
        );
    }
    let stripped = strip_upstream(item);
    errors.finish(())?;
    let (field, ty) = upstream.expect("checked above");
    Ok(AdaptorStruct {
        item: stripped,
        field,
        ty,
    })
}

/// The arguments of a resource's attribute, checked one by one.
#[derive(Default)]
struct ResourceArgs<'a> {
    /// Each key as given, valid or not (so a bad value is not also "missing").
    given: Vec<&'a Arg>,
    device: Option<(&'a Arg, (&'static str, u32))>,
    alignment: Option<(&'a Arg, LitInt)>,
    stream_ordered: Option<LitBool>,
    ledger: Option<(&'a Arg, Member)>,
    debug: Option<LitBool>,
    name: Option<LitStr>,
}

impl<'a> ResourceArgs<'a> {
    fn given(&self, keys: &[&str]) -> Option<&'a Arg> {
        self.given
            .iter()
            .copied()
            .find(|a| keys.iter().any(|k| a.key == k))
    }
}

fn lit(value: &Expr) -> Option<&Lit> {
    match value {
        Expr::Lit(expr) => Some(&expr.lit),
        _ => None,
    }
}

fn resource_args<'a>(args: &'a Args, errors: &mut Errors) -> ResourceArgs<'a> {
    let mut out = ResourceArgs::default();
    let mut seen: Vec<String> = Vec::new();
    for arg in &args.args {
        let key = arg.key.to_string();
        if seen.contains(&key) {
            errors.spanned(&arg.key, format_args!("`{key}` is given twice; keep one"));
            continue;
        }
        seen.push(key.clone());
        out.given.push(arg);
        match key.as_str() {
            "device" => match lit(&arg.value) {
                Some(Lit::Str(text)) => match names::device(&text.value()) {
                    Some(device) => out.device = Some((arg, device)),
                    None => errors.spanned(
                        text,
                        format_args!(
                            "unknown device {:?}: write \"TYPE\" or \"TYPE:ORDINAL\" with TYPE one of {}, \
                             e.g. `device = \"cuda:0\"`",
                            text.value(),
                            device_type_names()
                        ),
                    ),
                },
                _ => errors.spanned(
                    &arg.value,
                    "`device` takes a string: write e.g. `device = \"cpu\"` or `device = \"cuda:0\"`",
                ),
            },
            "alignment" => match lit(&arg.value) {
                Some(Lit::Int(int)) => match int.base10_parse::<u64>() {
                    Ok(n) if n.is_power_of_two() => out.alignment = Some((arg, int.clone())),
                    _ => errors.spanned(
                        int,
                        format_args!(
                            "alignment {} is not a power of two: write one of 1, 2, 4, 8, ..., \
                             e.g. `alignment = 64`",
                            int
                        ),
                    ),
                },
                _ => errors.spanned(
                    &arg.value,
                    "`alignment` takes an integer literal in bytes, a power of two: e.g. `alignment = 64`",
                ),
            },
            "stream_ordered" | "debug" => match lit(&arg.value) {
                Some(Lit::Bool(b)) => {
                    if key == "debug" {
                        out.debug = Some(b.clone());
                    } else {
                        out.stream_ordered = Some(b.clone());
                    }
                }
                _ => errors.spanned(
                    &arg.value,
                    format_args!("`{key}` takes `true` or `false`"),
                ),
            },
            "name" => match lit(&arg.value) {
                Some(Lit::Str(text)) if !text.value().is_empty() => out.name = Some(text.clone()),
                _ => errors.spanned(
                    &arg.value,
                    "`name` takes a non-empty string, the resource's name in resource chains: \
                     e.g. `name = \"Arena\"` (the type's name when left out)",
                ),
            },
            "ledger" => match member(&arg.value) {
                Some(m) => out.ledger = Some((arg, m)),
                None => errors.spanned(
                    &arg.value,
                    "`ledger` names the struct field holding a `devmm::Ledger`: e.g. `ledger = ledger` \
                     (or `ledger = 0` in a tuple struct)",
                ),
            },
            _ => errors.spanned(
                &arg.key,
                format_args!("unknown key `{key}`: #[memory_resource] accepts {KEYS}"),
            ),
        }
    }
    out
}

fn device_type_names() -> String {
    let names: Vec<&str> = names::DEVICE_TYPES.iter().map(|(n, _)| *n).collect();
    names.join(", ")
}

fn member(value: &Expr) -> Option<Member> {
    match value {
        Expr::Path(path) if path.qself.is_none() => {
            path.path.get_ident().cloned().map(Member::Named)
        }
        Expr::Lit(expr) => match &expr.lit {
            Lit::Int(int) => int.base10_parse::<u32>().ok().map(|i| {
                Member::Unnamed(syn::Index {
                    index: i,
                    span: int.span(),
                })
            }),
            _ => None,
        },
        _ => None,
    }
}

/// Checks the impl block of a resource (with arguments) or adaptor.
pub(crate) fn impl_block(args: &Args, item: &ItemImpl) -> syn::Result<ImplModel> {
    let mut errors = Errors::default();
    if let Some((path, _)) = &item.trait_ {
        // Nothing else is worth checking in an impl the macro cannot use.
        return Err(syn::Error::new_spanned(
            path,
            "#[memory_resource] writes the trait impl itself: put it on the inherent impl \
             `impl Type { fn allocate(..) .. }`",
        ));
    }
    let resource = !args.args.is_empty();
    let mut inherent = Vec::new();
    let mut written: Vec<ImplItemFn> = Vec::new();
    let mut allocate = None;
    let mut deallocate = None;
    for impl_item in &item.items {
        let ImplItem::Fn(f) = impl_item else {
            inherent.push(impl_item.clone());
            continue;
        };
        let name = f.sig.ident.to_string();
        let Some(&(_, expected)) = METHODS.iter().find(|(n, _)| *n == name) else {
            inherent.push(impl_item.clone());
            continue;
        };
        if written.iter().any(|w| w.sig.ident == f.sig.ident)
            || (name == "allocate" && allocate.is_some())
            || (name == "deallocate" && deallocate.is_some())
        {
            errors.spanned(&f.sig.ident, format_args!("`fn {name}` is written twice"));
            continue;
        }
        let takes_stream = check_signature(f, &name, expected, resource, &mut errors);
        if resource && matches!(name.as_str(), "upstream" | "detects_misuse" | "live_count") {
            errors.spanned(
                &f.sig.ident,
                format_args!(
                    "a resource of your own does not write `fn {name}`: #[memory_resource] \
                     generates it (from its ledger; a resource has no upstream). Remove it, or \
                     for an adaptor drop the attribute's arguments and mark its field #[upstream]"
                ),
            );
            continue;
        }
        let mut f = f.clone();
        f.vis = syn::Visibility::Inherited;
        match name.as_str() {
            "allocate" if resource => {
                allocate = Some(UserFn {
                    item: f,
                    takes_stream,
                })
            }
            "deallocate" if resource => {
                deallocate = Some(UserFn {
                    item: f,
                    takes_stream,
                })
            }
            _ => written.push(f),
        }
    }
    let kind = if resource {
        resource_kind(args, item, allocate, deallocate, &written, &mut errors)
    } else {
        Some(Kind::Adaptor)
    };
    let kind = errors
        .finish(kind)?
        .expect("a missing part records an error");
    let mut header = item.clone();
    header.items.clear();
    Ok(ImplModel {
        header,
        inherent,
        written,
        kind,
    })
}

/// Checks what a resource of the user's own needs beyond its methods:
/// the attribute's keys, and each probe given exactly once. `None` when an
/// error was recorded.
fn resource_kind(
    args: &Args,
    item: &ItemImpl,
    allocate: Option<UserFn>,
    deallocate: Option<UserFn>,
    written: &[ImplItemFn],
    errors: &mut Errors,
) -> Option<Kind> {
    let args = resource_args(args, errors);
    let mut missing = |what: &str| {
        errors.spanned(
            &item.self_ty,
            format_args!(
                "`{}` has no `{what}`: write it in this impl block",
                item.self_ty.to_token_stream()
            ),
        );
    };
    if allocate.is_none() {
        missing(METHODS[0].1);
    }
    if deallocate.is_none() {
        missing(METHODS[1].1);
    }
    probe_or_key(
        written,
        "device",
        args.given(&["device"]),
        "`device = \"cpu\"` (or \"cuda:0\", ...) to the attribute, or write `fn device(&self) -> Device`",
        &item.self_ty,
        errors,
    );
    probe_or_key(
        written,
        "guaranteed_alignment",
        args.given(&["alignment"]),
        "`alignment = 64` (bytes every pointer is aligned to) to the attribute, or write \
         `fn guaranteed_alignment(&self) -> usize`",
        &item.self_ty,
        errors,
    );
    if let Some(b) = &args.stream_ordered {
        if let Some(f) = written.iter().find(|f| f.sig.ident == "stream_ordered") {
            errors.spanned(
                &f.sig.ident,
                "stream ordering is given twice: remove `fn stream_ordered` or the \
                 `stream_ordered` key",
            );
        }
        if b.value {
            for f in [&allocate, &deallocate].into_iter().flatten() {
                if !f.takes_stream {
                    errors.spanned(
                        &f.item.sig.inputs,
                        format_args!(
                            "a stream-ordered resource gets the stream: add `stream: &Stream` \
                             as the last parameter of `fn {}`",
                            f.item.sig.ident
                        ),
                    );
                }
            }
        }
    }
    let debug = args.debug.as_ref().map(|b| b.value);
    let tracking = match (&args.ledger, debug) {
        (Some((_, field)), None) => Some(Tracking::Debug(field.clone())),
        (Some((_, field)), Some(true)) => Some(Tracking::Always(field.clone())),
        (None, Some(false)) => Some(Tracking::Never),
        (Some((arg, _)), Some(false)) => {
            errors.spanned(
                &arg.key,
                "`ledger` is unused with `debug = false`: remove one of them",
            );
            None
        }
        (None, _) if args.given(&["ledger", "debug"]).is_none() => {
            errors.push(syn::Error::new(
                Span::call_site(),
                "a resource keeps a ledger of its live allocations in debug builds: add a \
                 `ledger: devmm::Ledger` field and `ledger = ledger` to the attribute, or \
                 write `debug = false` to go without",
            ));
            None
        }
        // A `ledger` or `debug` value that did not parse: already reported.
        (None, _) => None,
    };
    match (allocate, deallocate, tracking) {
        (Some(allocate), Some(deallocate), Some(tracking)) => {
            Some(Kind::Resource(Box::new(Resource {
                allocate,
                deallocate,
                device: args.device.map(|(_, d)| d),
                alignment: args.alignment.map(|(_, a)| a),
                stream_ordered: args.stream_ordered,
                tracking,
                name: args.name,
            })))
        }
        // Each missing part has recorded its error.
        _ => None,
    }
}

/// Checks that a probe is given exactly once: as an attribute key or as a
/// written method.
fn probe_or_key(
    written: &[ImplItemFn],
    method: &str,
    key: Option<&Arg>,
    how: &str,
    self_ty: &Type,
    errors: &mut Errors,
) {
    let written = written.iter().find(|f| f.sig.ident == method);
    match (written, key) {
        (Some(f), Some(arg)) => {
            let message = format!(
                "`{method}` is given twice: remove `fn {method}` or the `{}` key",
                arg.key
            );
            errors.spanned(&f.sig.ident, &message);
            errors.spanned(&arg.key, &message);
        }
        (None, None) => {
            errors.spanned(
                self_ty,
                format_args!(
                    "`{}` does not say its {}: add {how}",
                    self_ty.to_token_stream(),
                    method.replace('_', " ")
                ),
            );
        }
        _ => {}
    }
}
