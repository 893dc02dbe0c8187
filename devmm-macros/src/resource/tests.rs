//! Snapshots of the code `#[memory_resource]` generates, so a change to it
//! shows up in review.

use quote::quote;

use super::expand::expand;
use crate::expansion::pretty;

fn expand_attr(args: proc_macro2::TokenStream, item: proc_macro2::TokenStream) -> String {
    let args = syn::parse2(args).expect("arguments parse");
    let item = syn::parse2(item).expect("item parses");
    pretty(expand(args, item).expect("expansion"))
}

#[test]
fn resource_with_ledger() {
    insta::assert_snapshot!(expand_attr(
        quote!(
            device = "cuda:1",
            alignment = 256,
            stream_ordered = true,
            ledger = ledger
        ),
        quote! {
            impl Arena {
                pub fn new() -> Self { Arena::default() }
                fn allocate(&self, nbytes: usize, stream: &Stream) -> Result<DevicePtr> {
                    self.pool.take(nbytes, stream)
                }
                unsafe fn deallocate(&self, ptr: DevicePtr, nbytes: usize, stream: &Stream) -> Result<()> {
                    self.pool.give(ptr, nbytes, stream)
                }
            }
        },
    ));
}

#[test]
fn resource_without_stream_or_tracking() {
    insta::assert_snapshot!(expand_attr(
        quote!(device = "cpu", alignment = 64, debug = false),
        quote! {
            impl<T: Send + Sync> Typed<T> where T: 'static {
                fn allocate(&self, nbytes: usize) -> Result<DevicePtr> { todo(nbytes) }
                unsafe fn deallocate(&self, ptr: DevicePtr, nbytes: usize) -> Result<()> { todo(ptr, nbytes) }
                fn available_memory(&self) -> Result<MemoryInfo> { self.info() }
            }
        },
    ));
}

#[test]
fn adaptor_struct() {
    insta::assert_snapshot!(expand_attr(
        quote!(),
        quote! {
            #[derive(Debug)]
            pub struct Counting<U> where U: Send {
                #[upstream]
                inner: U,
                count: AtomicUsize,
            }
        },
    ));
}

#[test]
fn adaptor_impl() {
    insta::assert_snapshot!(expand_attr(
        quote!(),
        quote! {
            impl<U: MemoryResource> Counting<U> {
                fn allocate(&self, nbytes: usize, stream: &Stream) -> Result<DevicePtr> {
                    self.count.fetch_add(1, Relaxed);
                    self.inner.allocate(nbytes, stream)
                }
                fn detects_misuse(&self) -> bool { true }
            }
        },
    ));
}

#[test]
fn errors_keep_a_stub_of_the_item() {
    insta::assert_snapshot!(expand_attr(
        quote!(alignment = 3),
        quote! {
            impl Arena {
                fn allocate(&self, nbytes: usize) -> Result<DevicePtr> { todo(nbytes) }
            }
        },
    ));
}
