//! The fake drivers' C entry points, from the same description as the
//! tables: every function with a role (`as ROLE`) that the fake implements
//! becomes an exported `extern "C"` function with the real C signature,
//! forwarding to the fake engine's entry point for that role with the
//! platform's dialect and the symbol's name. So the fakes cannot drift from
//! the signatures devmm loads, and the CUDA and HIP fakes share one source.
//!
//! ```
//! use devmm_codegen::{fake::{emit_fake, FakeTarget}, parse::parse};
//! let api = parse("mini.api", "api Mini\ntable MiniTable\nlibrary libmini.so\nenv MINI_PATH\n\
//!                              fn required 1.0 int miniFree(void* ptr) as free\n")?;
//! let target = FakeTarget {
//!     platform: "crate::platform::MINI",
//!     entry: "fake_driver::entry",
//!     bodies: &[("free", "memory::free")],
//! };
//! let code = emit_fake(&api, "mini.api", &target, |_| true)?;
//! assert!(code.contains("pub unsafe extern \"C\" fn miniFree(ptr: *mut ::core::ffi::c_void) -> ::core::ffi::c_int"));
//! assert!(code.contains("fake_driver::entry::memory::free(&crate::platform::MINI, \"miniFree\", ptr)"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use proc_macro2::TokenStream;
use quote::quote;

use crate::api::{Api, BaseType, CType, Function};
use crate::emit::{ident, rust_type};

/// What a fake library's entry points forward to.
#[derive(Clone, Copy, Debug)]
pub struct FakeTarget<'a> {
    /// The Rust path of the platform's dialect (`crate::platform::CUDA`).
    pub platform: &'a str,
    /// The Rust path of the engine's entry-point modules (`fake_driver::entry`).
    pub entry: &'a str,
    /// Role to body, a path under `entry` (`("malloc", "memory::malloc")`).
    pub bodies: &'a [(&'a str, &'a str)],
}

/// Why each generated `unsafe` block is sound.
const SAFETY: &str = "// SAFETY: the exported function's contract is the C API's, which is the \
                      entry point's.";

/// The exported functions for every role-tagged function of `api` that
/// `target` has a body for and `include` keeps (a fake built without some
/// symbols leaves them out).
pub fn emit_fake(
    api: &Api,
    source_name: &str,
    target: &FakeTarget<'_>,
    include: impl Fn(&Function) -> bool,
) -> Result<String, syn::Error> {
    let platform: syn::Path = syn::parse_str(target.platform)?;
    let entry: syn::Path = syn::parse_str(target.entry)?;
    let mut functions = Vec::new();
    for f in api.functions.iter().filter(|f| include(f)) {
        let Some(role) = f.role.as_deref() else {
            continue;
        };
        let Some(&(_, body)) = target.bodies.iter().find(|(r, _)| *r == role) else {
            continue;
        };
        let body: syn::Path = syn::parse_str(body)?;
        functions.push(exported(api, f, &platform, &entry, &body, source_name));
    }
    let file: syn::File = syn::parse2(quote! { #(#functions)* })?;
    Ok(add_safety_comments(&prettyplease::unparse(&file)))
}

fn exported(
    api: &Api,
    f: &Function,
    platform: &syn::Path,
    entry: &syn::Path,
    body: &syn::Path,
    source_name: &str,
) -> TokenStream {
    let name = ident(&f.name);
    let symbol = &f.name;
    let resolve = |ty: &CType| rust_type(&resolved(api, ty), entry);
    let params = f.params.iter().map(|p| {
        let param = ident(&p.name);
        let ty = resolve(&p.ty);
        quote!(#param: #ty)
    });
    let args = f.params.iter().map(|p| ident(&p.name));
    let ret = if f.ret.is_void() {
        TokenStream::new()
    } else {
        let ty = resolve(&f.ret);
        quote!(-> #ty)
    };
    let doc = format!(" `{f}`, generated from `{source_name}`.");
    quote! {
        #[doc = #doc]
        #[doc = ""]
        #[doc = " # Safety"]
        #[doc = " The C API's contract: pointer arguments are null or valid for what the call does."]
        #[no_mangle]
        #[allow(non_snake_case, unused_unsafe)]
        pub unsafe extern "C" fn #name(#(#params),*) #ret {
            unsafe { #entry::#body(&#platform, #symbol, #(#args),*) }
        }
    }
}

/// `ty` with type aliases replaced by what they stand for, so the fake
/// needs none of the description's names.
fn resolved(api: &Api, ty: &CType) -> CType {
    match &ty.base {
        BaseType::Alias(name) => match api.types.iter().find(|a| &a.name == name) {
            Some(alias) => {
                let inner = resolved(api, &alias.ty);
                CType {
                    base: inner.base,
                    is_const: ty.is_const || inner.is_const,
                    pointers: inner.pointers + ty.pointers,
                }
            }
            None => ty.clone(),
        },
        _ => ty.clone(),
    }
}

/// Puts [`SAFETY`] above every line the formatter opened an `unsafe` block on.
fn add_safety_comments(formatted: &str) -> String {
    let mut out = String::with_capacity(formatted.len() + 4096);
    for line in formatted.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("unsafe {") {
            out.push_str(&line[..line.len() - trimmed.len()]);
            out.push_str(SAFETY);
            out.push('\n');
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}
