//! Procedural macros for devmm: `#[memory_resource]`, generated adaptors,
//! `layout!` and `#[derive(Element)]`.
//!
//! Users depend on `devmm`, which re-exports these macros and documents
//! them; this crate is an implementation detail whose version the facade
//! pins exactly. Each macro is parsed (`parse`), checked (`validate`, every
//! error collected in one pass and spanned on the user's token) and
//! generated (`expand`), naming everything through `::devmm::__private`.

use proc_macro::TokenStream;
use syn::parse_macro_input;

mod diagnostics;
mod element;
#[cfg(test)]
mod expansion;
mod layout;
mod names;
mod resource;

/// Writes the `MemoryResource` impl of a resource or an adaptor.
///
/// On an inherent impl block with arguments (`device = "cpu"`,
/// `alignment = 64`, `stream_ordered = false`, `ledger = FIELD`,
/// `debug = bool`), the block's `fn allocate(&self, nbytes: usize[, stream:
/// &Stream]) -> Result<DevicePtr>` and `unsafe fn deallocate(&self, ptr:
/// DevicePtr, nbytes: usize[, stream: &Stream]) -> Result<()>` become a
/// checked resource: pointers that break the alignment promise are errors,
/// and in debug builds the ledger counts live allocations and reports
/// unknown pointers, wrong sizes and double frees as `Error::Misuse`.
///
/// On a struct (no arguments), it marks an adaptor whose `#[upstream]` field
/// is the wrapped resource; on that adaptor's impl block (no arguments) it
/// forwards every method not written there. devmm's crate docs (section
/// "Macros") have the full rules.
///
/// ```
/// use devmm::{memory_resource, DevicePtr, Ledger, MemoryResource, Stream};
///
/// #[derive(Debug, Default)]
/// struct Fixed {
///     ledger: Ledger,
/// }
///
/// #[memory_resource(device = "cpu", alignment = 16, ledger = ledger, debug = true)]
/// impl Fixed {
///     fn allocate(&self, _nbytes: usize) -> devmm::Result<DevicePtr> {
///         Ok(DevicePtr::from_addr(0x1000)) // an address, never dereferenced
///     }
///
///     unsafe fn deallocate(&self, _ptr: DevicePtr, _nbytes: usize) -> devmm::Result<()> {
///         Ok(())
///     }
/// }
///
/// let mr = Fixed::default();
/// let p = mr.allocate(8, &Stream::cpu())?;
/// assert_eq!(mr.live_count(), Some(1));
/// // SAFETY: the ledger checks the pointer; a double free is an error.
/// unsafe { mr.deallocate(p, 8, &Stream::cpu())? };
/// assert!(unsafe { mr.deallocate(p, 8, &Stream::cpu()) }.is_err());
/// # Ok::<(), devmm::Error>(())
/// ```
#[proc_macro_attribute]
pub fn memory_resource(args: TokenStream, item: TokenStream) -> TokenStream {
    let args = parse_macro_input!(args as resource::parse::Args);
    let item = parse_macro_input!(item as resource::parse::Item);
    resource::expand::expand(args, item)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// A `StaticLayout` of a static shape, resolved at compile time by the same
/// rule as the run-time layout policies.
///
/// `layout!(ELEMENT, [EXTENT, ..], POLICY)` with POLICY one of `row_major`
/// (the default), `col_major`, `permuted(D, ..)` or
/// `aligned(POLICY, unit_stride = N, base = N)`. An EXTENT is an integer
/// literal or the name of a `usize` constant: a const item, or a const
/// generic of the function it is written in.
///
/// ```
/// const ROWS: devmm::StaticLayout<2> =
///     devmm::layout!(f32, [3, 5], aligned(row_major, unit_stride = 32, base = 64));
/// assert_eq!(ROWS.strides(), &[8, 1]);
/// assert_eq!(ROWS.required_nbytes(), 128);
///
/// fn points<const N: usize>() -> devmm::StaticLayout<2> {
///     devmm::layout!(f32, [N, 3])
/// }
/// assert_eq!(points::<4>().shape(), &[4, 3]);
/// ```
#[proc_macro]
pub fn layout(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as layout::parse::Input);
    layout::expand::expand(input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// Implements `devmm::Element` for a `#[repr(C)]` or `#[repr(transparent)]`
/// struct of `Element` fields, with `#[element(dtype = "NAME")]` naming its
/// DLPack dtype; size and alignment are checked against the dtype at compile
/// time.
///
/// ```
/// #[derive(Clone, Copy, devmm::Element)]
/// #[repr(transparent)]
/// #[element(dtype = "float32")]
/// struct Celsius(f32);
///
/// assert_eq!(<Celsius as devmm::Element>::DTYPE, devmm::DType::FLOAT32);
/// ```
#[proc_macro_derive(Element, attributes(element))]
pub fn derive_element(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as syn::DeriveInput);
    element::expand::expand(input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}
