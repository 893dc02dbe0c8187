pub(crate) fn expand(_i: syn::DeriveInput) -> syn::Result<proc_macro2::TokenStream> { todo!() }
