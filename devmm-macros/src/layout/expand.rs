pub(crate) fn expand(_i: super::parse::Input) -> syn::Result<proc_macro2::TokenStream> { todo!() }
