pub(crate) type Input = syn::DeriveInput;
