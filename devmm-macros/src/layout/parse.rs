pub(crate) struct Input; impl syn::parse::Parse for Input { fn parse(_i: syn::parse::ParseStream<'_>) -> syn::Result<Self> { Ok(Input) } }
