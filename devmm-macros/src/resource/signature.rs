//! The signatures of the `MemoryResource` methods a user may write, and
//! the check of a written method against them.

use quote::ToTokens;
use syn::{
    FnArg, GenericArgument, Ident, ImplItemFn, PathArguments, ReceiverKind, ReturnType, Safety,
    Type,
};

use crate::diagnostics::Errors;

/// The trait methods, with the signature each must have (for messages).
pub(crate) const METHODS: &[(&str, &str)] = &[
    (
        "allocate",
        "fn allocate(&self, nbytes: usize, stream: &Stream) -> devmm::Result<DevicePtr>",
    ),
    (
        "deallocate",
        "unsafe fn deallocate(&self, ptr: DevicePtr, nbytes: usize, stream: &Stream) -> devmm::Result<()>",
    ),
    ("device", "fn device(&self) -> Device"),
    ("stream_ordered", "fn stream_ordered(&self) -> bool"),
    ("guaranteed_alignment", "fn guaranteed_alignment(&self) -> usize"),
    (
        "available_memory",
        "fn available_memory(&self) -> devmm::Result<MemoryInfo>",
    ),
    ("upstream", "fn upstream(&self) -> Option<&dyn MemoryResource>"),
    ("detects_misuse", "fn detects_misuse(&self) -> bool"),
    ("live_count", "fn live_count(&self) -> Option<usize>"),
    ("dereferenceable", "fn dereferenceable(&self) -> bool"),
];

/// Whether `ident` names a `MemoryResource` method.
pub(crate) fn is_trait_method(ident: &Ident) -> bool {
    METHODS.iter().any(|(name, _)| ident == name)
}

/// The last identifier of a type path (`devmm::Result<T>` → `Result`).
fn type_name(ty: &Type) -> Option<&Ident> {
    match ty {
        Type::Path(path) if path.qself.is_none() => path.path.segments.last().map(|s| &s.ident),
        Type::Group(group) => type_name(&group.elem),
        Type::Paren(paren) => type_name(&paren.elem),
        _ => None,
    }
}

fn is_named(ty: &Type, name: &str) -> bool {
    type_name(ty).is_some_and(|i| i == name)
}

fn is_stream_ref(ty: &Type) -> bool {
    match ty {
        Type::Reference(r) => r.mutability.is_none() && is_named(&r.elem, "Stream"),
        _ => false,
    }
}

/// Checks one method against its trait signature; `allocate` and
/// `deallocate` of a resource may leave out the stream. Returns whether the
/// method takes the stream.
pub(crate) fn check_signature(
    f: &ImplItemFn,
    name: &str,
    expected: &str,
    resource: bool,
    errors: &mut Errors,
) -> bool {
    let sig = &f.sig;
    let must = |what: &str| format!("{what}: `fn {name}` must be `{expected}`");
    if sig.constness.is_some() || sig.asyncness.is_some() || sig.abi.is_some() {
        let token = sig
            .constness
            .as_ref()
            .map(ToTokens::to_token_stream)
            .or(sig.asyncness.as_ref().map(ToTokens::to_token_stream))
            .unwrap_or_else(|| sig.abi.to_token_stream());
        errors.spanned(token, must("remove this qualifier"));
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        errors.spanned(&sig.generics, must("remove the generic parameters"));
    }
    let is_unsafe = matches!(sig.safety, Safety::Unsafe(_));
    if name == "deallocate" && !is_unsafe {
        errors.spanned(
            sig.fn_token,
            must("`deallocate` trusts its caller with the pointer; write `unsafe fn deallocate`"),
        );
    } else if name != "deallocate" && is_unsafe {
        errors.spanned(&sig.safety, must("remove `unsafe`"));
    }
    let mut inputs = sig.inputs.iter();
    match inputs.next() {
        Some(FnArg::Receiver(r))
            if r.mutability.is_none() && matches!(r.kind, ReceiverKind::Reference(_, _, None)) => {}
        Some(arg @ FnArg::Receiver(_)) => {
            errors.spanned(
                arg,
                must("resources are shared between threads; take `&self`"),
            );
        }
        _ => errors.spanned(&sig.ident, must("add `&self` as the first parameter")),
    }
    let params: Vec<&Type> = inputs
        .filter_map(|arg| match arg {
            FnArg::Typed(pat) => Some(&*pat.ty),
            FnArg::Receiver(_) => None,
        })
        .collect();
    let (required, optional_stream): (&[&str], bool) = match name {
        "allocate" => (&["usize"], true),
        "deallocate" => (&["DevicePtr", "usize"], true),
        _ => (&[], false),
    };
    let mut takes_stream = false;
    if params.len() < required.len() || params.len() > required.len() + usize::from(optional_stream)
    {
        errors.spanned(
            &sig.inputs,
            must(&format!(
                "wrong number of parameters{}",
                if resource && optional_stream {
                    " (the stream may be left out by a resource that is not stream-ordered)"
                } else {
                    ""
                }
            )),
        );
    } else {
        for (ty, want) in params.iter().zip(required) {
            if !is_named(ty, want) {
                errors.spanned(ty, must(&format!("expected `{want}`")));
            }
        }
        if let Some(stream) = params.get(required.len()) {
            takes_stream = true;
            if !is_stream_ref(stream) {
                errors.spanned(stream, must("expected `&Stream`"));
            }
        } else if optional_stream && !resource {
            errors.spanned(
                &sig.inputs,
                must("an adaptor passes the stream on to its upstream; add `stream: &Stream`"),
            );
        }
    }
    let returns = match name {
        "allocate" | "deallocate" | "available_memory" => "Result",
        "device" => "Device",
        "stream_ordered" | "detects_misuse" | "dereferenceable" => "bool",
        "guaranteed_alignment" => "usize",
        _ => "Option",
    };
    match &sig.output {
        ReturnType::Type(_, ty) if is_named(ty, returns) => {
            if wrong_result_argument(ty, name) {
                let ok = expected.rsplit_once("-> ").map_or(expected, |(_, ret)| ret);
                let hint = match name {
                    "allocate" => {
                        " (a host pointer becomes one with `DevicePtr::from_host_ptr(ptr)`, \
                         an address with `DevicePtr::from_addr(addr)`)"
                    }
                    _ => "",
                };
                errors.spanned(ty, must(&format!("expected `{ok}`{hint}")));
            }
        }
        ReturnType::Type(_, ty) => errors.spanned(ty, must(&format!("expected `{returns}`"))),
        ReturnType::Default => errors.spanned(
            &sig.ident,
            must(&format!("add the return type (`-> {returns}..`)")),
        ),
    }
    takes_stream
}

/// Whether `ty`, a `Result<..>`, holds another value than the method's
/// (`DevicePtr` for `allocate`, `()` for `deallocate`, `MemoryInfo` for
/// `available_memory`): checked here so the error points at the user's
/// type, not into the generated code.
fn wrong_result_argument(ty: &Type, method: &str) -> bool {
    let Type::Path(path) = ty else {
        return false;
    };
    let Some(PathArguments::AngleBracketed(args)) =
        path.path.segments.last().map(|segment| &segment.arguments)
    else {
        return false;
    };
    let Some(GenericArgument::Type(value)) = args.args.first() else {
        return false;
    };
    match method {
        "allocate" => !is_named(value, "DevicePtr"),
        "deallocate" => !matches!(value, Type::Tuple(unit) if unit.elems.is_empty()),
        "available_memory" => !is_named(value, "MemoryInfo"),
        _ => false,
    }
}
