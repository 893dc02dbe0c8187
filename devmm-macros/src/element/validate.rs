//! Checks a `#[derive(Element)]` input.

use syn::{Data, DeriveInput, Type};

use super::parse::{element_args, repr_kinds};
use crate::diagnostics::Errors;
use crate::names::{self, DTypeName};

pub(crate) struct Element<'a> {
    pub(crate) dtype: &'static DTypeName,
    /// The `"float32"` literal, where size and alignment errors point.
    pub(crate) dtype_token: syn::LitStr,
    pub(crate) fields: Vec<&'a Type>,
}

pub(crate) fn validate(input: &DeriveInput) -> syn::Result<Element<'_>> {
    let mut errors = Errors::default();
    let fields: Vec<&Type> = match &input.data {
        Data::Struct(data) => data.fields.iter().map(|f| &f.ty).collect(),
        _ => {
            errors.spanned(
                &input.ident,
                "derive(Element) needs a struct: devmm reinterprets buffers of the dtype as this \
                 type, which an enum or union cannot be",
            );
            Vec::new()
        }
    };
    if !input.generics.params.is_empty() {
        errors.spanned(
            &input.generics,
            "derive(Element) needs a concrete type, whose size is checked against the dtype: \
             remove the generic parameters",
        );
    }
    let repr = repr_kinds(&input.attrs)?;
    if !repr.iter().any(|r| r == "C" || r == "transparent") {
        errors.spanned(
            &input.ident,
            "derive(Element) needs a defined layout: add `#[repr(C)]` or `#[repr(transparent)]`",
        );
    }
    let mut dtype = None;
    let attrs = element_args(&input.attrs)?;
    if attrs.is_empty() {
        errors.spanned(
            &input.ident,
            "derive(Element) needs the dtype: add e.g. `#[element(dtype = \"float32\")]`",
        );
    }
    for (attr, args) in &attrs {
        if args.is_empty() {
            errors.spanned(attr, "write `#[element(dtype = \"float32\")]`");
        }
        for arg in args {
            if arg.key != "dtype" {
                errors.spanned(
                    &arg.key,
                    format_args!("unknown key `{}`: #[element] accepts only `dtype`", arg.key),
                );
                continue;
            }
            let Some(value) = &arg.value else {
                errors.spanned(
                    &arg.meta,
                    "`dtype` takes a string: write e.g. `dtype = \"float32\"`",
                );
                continue;
            };
            if dtype.is_some() {
                errors.spanned(&arg.key, "`dtype` is given twice; keep one");
                continue;
            }
            match names::dtype(&value.value()) {
                Some(d) => dtype = Some((d, value.clone())),
                None => errors.spanned(
                    value,
                    format_args!(
                        "unknown dtype {:?}: use one of {}",
                        value.value(),
                        names::dtype_names()
                    ),
                ),
            }
        }
    }
    errors.finish(())?;
    let (dtype, dtype_token) = dtype.expect("checked above");
    Ok(Element {
        dtype,
        dtype_token,
        fields,
    })
}
