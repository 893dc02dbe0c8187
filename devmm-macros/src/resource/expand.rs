//! Generates the code for a validated `#[memory_resource]`.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, ToTokens};
use syn::{ImplItemFn, LitStr, Type};

use super::parse::{Args, Item};
use super::signature;
use super::validate::{self, AdaptorStruct, ImplModel, Kind, Resource, Tracking, UserFn};

/// Expands the attribute; on errors, emits them with a stub of the item so
/// the rest of the crate does not fail on its absence too.
pub(crate) fn expand(args: Args, item: Item) -> syn::Result<TokenStream> {
    let checked = match &item {
        Item::Struct(s) => validate::adaptor_struct(&args, s).map(|m| adaptor_struct(&m)),
        Item::Impl(i) => validate::impl_block(&args, i).map(|m| impl_block(&m)),
    };
    match checked {
        Ok(tokens) => Ok(tokens),
        Err(errors) => {
            let mut tokens = fallback(&item);
            tokens.extend(errors.into_compile_error());
            Ok(tokens)
        }
    }
}

/// The item as if the attribute were not there (minus the markers only the
/// attribute understands).
fn fallback(item: &Item) -> TokenStream {
    match item {
        Item::Struct(item) => validate::strip_upstream(item).into_token_stream(),
        // A trait impl is complete as written.
        Item::Impl(item) if item.trait_.is_some() => item.into_token_stream(),
        Item::Impl(item) => {
            // The trait methods stay, so their bodies are still checked and
            // their imports used, but under hidden names: as `allocate` they
            // would shadow the trait's method at every call site.
            let mut item = item.clone();
            for (index, impl_item) in item.items.iter_mut().enumerate() {
                if let syn::ImplItem::Fn(f) = impl_item {
                    if signature::is_trait_method(&f.sig.ident) {
                        let name = format_ident!("__devmm_{}_{}", f.sig.ident, index);
                        *f = renamed(f, &name);
                        f.attrs.push(syn::parse_quote!(#[allow(dead_code)]));
                    }
                }
            }
            item.into_token_stream()
        }
    }
}

fn adaptor_struct(model: &AdaptorStruct) -> TokenStream {
    let AdaptorStruct { item, field, ty } = model;
    let name = &item.ident;
    let (impl_generics, ty_generics, where_clause) = item.generics.split_for_impl();
    let mut predicates = where_clause
        .map(|w| w.predicates.clone())
        .unwrap_or_default();
    predicates.push(syn::parse_quote!(#ty: ::devmm::__private::MemoryResource));
    quote! {
        #item

        #[automatically_derived]
        impl #impl_generics ::devmm::__private::Adaptor for #name #ty_generics
        where
            #predicates
        {
            type Upstream = #ty;

            fn upstream(&self) -> &Self::Upstream {
                &self.#field
            }
        }
    }
}

fn impl_block(model: &ImplModel) -> TokenStream {
    let ImplModel {
        header,
        inherent,
        written,
        kind,
    } = model;
    let (impl_generics, _, where_clause) = header.generics.split_for_impl();
    let self_ty = &header.self_ty;
    let attrs = &header.attrs;
    let is_written = |name: &str| written.iter().any(|f| f.sig.ident == name);
    let (user_fns, generated, written) = match kind {
        Kind::Adaptor => {
            // A written `allocate` is wrapped too, so failures through it
            // name the adaptor in their chain like forwarded ones do.
            let (allocate, written): (Vec<_>, Vec<_>) =
                written.iter().partition(|f| f.sig.ident == "allocate");
            let user_fns = allocate
                .first()
                .map(|f| renamed(f, &format_ident!("__devmm_allocate")).into_token_stream())
                .unwrap_or_default();
            let methods = adaptor_methods(self_ty, !allocate.is_empty(), &is_written);
            (user_fns, methods, written)
        }
        Kind::Resource(resource) => {
            let (user_fns, mut methods) = resource_methods(resource, &is_written);
            let name = resource
                .name
                .as_ref()
                .map_or_else(|| type_name(self_ty), LitStr::value);
            // Named as the shipped resources are, not by the derived `Debug`
            // (every field, the ledger's included).
            methods.extend(quote! {
                fn fmt_name(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                    ::core::write!(
                        f,
                        "{}(device={}, alignment={})",
                        #name,
                        ::devmm::__private::MemoryResource::device(self),
                        ::devmm::__private::MemoryResource::guaranteed_alignment(self),
                    )
                }
            });
            (user_fns, methods, written.iter().collect())
        }
    };
    let inherent_impl = if inherent.is_empty() && user_fns.is_empty() {
        TokenStream::new()
    } else {
        quote! {
            #(#attrs)*
            impl #impl_generics #self_ty #where_clause {
                #(#inherent)*
                #user_fns
            }
        }
    };
    quote! {
        #inherent_impl

        #[automatically_derived]
        impl #impl_generics ::devmm::__private::MemoryResource for #self_ty #where_clause {
            #(#written)*
            #generated
        }
    }
}

/// Forwards to `Adaptor::upstream` every method the user did not write;
/// `allocate` calls the user's when `own_allocate`.
fn adaptor_methods(
    self_ty: &Type,
    own_allocate: bool,
    is_written: &dyn Fn(&str) -> bool,
) -> TokenStream {
    let name = type_name(self_ty);
    let upstream = quote!(::devmm::__private::Adaptor::upstream(self));
    let mr = quote!(::devmm::__private::MemoryResource);
    let allocate = if own_allocate {
        quote!(Self::__devmm_allocate(self, nbytes, stream))
    } else {
        quote!(#mr::allocate(#upstream, nbytes, stream))
    };
    let mut methods = quote! {
        fn allocate(
            &self,
            nbytes: usize,
            stream: &::devmm::__private::Stream,
        ) -> ::devmm::__private::Result<::devmm::__private::DevicePtr> {
            #allocate.map_err(|error| ::devmm::__private::through(self, error, #name))
        }
    };
    let mut add = |method: &str, tokens: TokenStream| {
        if !is_written(method) {
            methods.extend(tokens);
        }
    };
    add(
        "deallocate",
        quote! {
            unsafe fn deallocate(
                &self,
                ptr: ::devmm::__private::DevicePtr,
                nbytes: usize,
                stream: &::devmm::__private::Stream,
            ) -> ::devmm::__private::Result<()> {
                // SAFETY: forwarded verbatim; the caller upholds the contract.
                unsafe { #mr::deallocate(#upstream, ptr, nbytes, stream) }
            }
        },
    );
    for (method, ret) in [
        ("device", quote!(::devmm::__private::Device)),
        ("stream_ordered", quote!(bool)),
        ("guaranteed_alignment", quote!(usize)),
        (
            "available_memory",
            quote!(::devmm::__private::Result<::devmm::__private::MemoryInfo>),
        ),
        ("detects_misuse", quote!(bool)),
        ("live_count", quote!(::core::option::Option<usize>)),
        ("dereferenceable", quote!(bool)),
    ] {
        let ident = format_ident!("{}", method);
        add(
            method,
            quote! {
                fn #ident(&self) -> #ret {
                    #mr::#ident(#upstream)
                }
            },
        );
    }
    add(
        "upstream",
        quote! {
            fn upstream(&self) -> ::core::option::Option<&dyn #mr> {
                ::core::option::Option::Some(#upstream)
            }
        },
    );
    methods
}

/// The user's `allocate` and `deallocate` (renamed, kept inherent) and the
/// trait methods wrapping them in the checks.
fn resource_methods(
    resource: &Resource,
    is_written: &dyn Fn(&str) -> bool,
) -> (TokenStream, TokenStream) {
    let allocate_fn = format_ident!("__devmm_allocate");
    let deallocate_fn = format_ident!("__devmm_deallocate");
    let user_fns = [
        renamed(&resource.allocate.item, &allocate_fn),
        renamed(&resource.deallocate.item, &deallocate_fn),
    ];
    let stream = |f: &UserFn| f.takes_stream.then(|| quote!(, stream));
    let alloc_stream = stream(&resource.allocate);
    let dealloc_stream = stream(&resource.deallocate);
    let ledger = match &resource.tracking {
        Tracking::Debug(field) => quote! {
            if ::core::cfg!(debug_assertions) {
                ::core::option::Option::Some(&self.#field)
            } else {
                ::core::option::Option::None
            }
        },
        Tracking::Always(field) => quote!(::core::option::Option::Some(&self.#field)),
        Tracking::Never => quote!(::core::option::Option::None),
    };
    let tracks = match &resource.tracking {
        Tracking::Debug(_) => quote!(::core::cfg!(debug_assertions)),
        Tracking::Always(_) => quote!(true),
        Tracking::Never => quote!(false),
    };
    let mut methods = quote! {
        fn allocate(
            &self,
            nbytes: usize,
            stream: &::devmm::__private::Stream,
        ) -> ::devmm::__private::Result<::devmm::__private::DevicePtr> {
            let _ = stream;
            ::devmm::__private::allocated(
                self,
                #ledger,
                nbytes,
                Self::#allocate_fn(self, nbytes #alloc_stream),
                |ptr| {
                    // SAFETY: `ptr` was just allocated with `nbytes` by this
                    // resource and never handed out.
                    unsafe { Self::#deallocate_fn(self, ptr, nbytes #dealloc_stream) }
                },
            )
        }

        unsafe fn deallocate(
            &self,
            ptr: ::devmm::__private::DevicePtr,
            nbytes: usize,
            stream: &::devmm::__private::Stream,
        ) -> ::devmm::__private::Result<()> {
            let _ = stream;
            ::devmm::__private::deallocate(self, #ledger, ptr, nbytes, || {
                // SAFETY: the caller upholds `deallocate`'s contract; when
                // tracking, the ledger has confirmed `ptr` is live with `nbytes`.
                unsafe { Self::#deallocate_fn(self, ptr, nbytes #dealloc_stream) }
            })
        }

        fn detects_misuse(&self) -> bool {
            #tracks
        }

        fn live_count(&self) -> ::core::option::Option<usize> {
            (#ledger).map(::devmm::__private::Ledger::live_count)
        }
    };
    if let Some((variant, ordinal)) = resource.device {
        let variant = format_ident!("{}", variant);
        methods.extend(quote! {
            fn device(&self) -> ::devmm::__private::Device {
                ::devmm::__private::Device::new(::devmm::__private::DeviceType::#variant, #ordinal)
            }
        });
    }
    if let Some(alignment) = &resource.alignment {
        let alignment = syn::LitInt::new(alignment.base10_digits(), alignment.span());
        methods.extend(quote! {
            fn guaranteed_alignment(&self) -> usize {
                #alignment
            }
        });
    }
    if let Some(ordered) = &resource.stream_ordered {
        methods.extend(quote! {
            fn stream_ordered(&self) -> bool {
                #ordered
            }
        });
    }
    if !is_written("available_memory") {
        methods.extend(quote! {
            fn available_memory(
                &self,
            ) -> ::devmm::__private::Result<::devmm::__private::MemoryInfo> {
                ::devmm::__private::device_memory_info(
                    ::devmm::__private::MemoryResource::device(self),
                )
            }
        });
    }
    (quote!(#(#user_fns)*), methods)
}

/// The user's function under a hidden name, so that calling `allocate` on
/// the concrete type reaches the checked trait method, not this one.
fn renamed(f: &ImplItemFn, name: &syn::Ident) -> ImplItemFn {
    let mut item = f.clone();
    item.sig.ident = syn::Ident::new(&name.to_string(), f.sig.ident.span());
    item.attrs.push(syn::parse_quote!(#[doc(hidden)]));
    item
}

/// The type's name for error chains (`Counting` for `Counting<U>`).
fn type_name(ty: &Type) -> String {
    match ty {
        Type::Path(path) => path
            .path
            .segments
            .last()
            .map_or_else(|| ty.to_token_stream().to_string(), |s| s.ident.to_string()),
        _ => ty.to_token_stream().to_string(),
    }
}
