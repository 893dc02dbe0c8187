//! Facts the macros' generated code and the DLPack export rely on,
//! checked at compile time.

use std::sync::Arc;

use devmm::__private::Adaptor;
use devmm::{
    DType, Device, DevicePtr, Element, LayoutRuleError, Ledger, MemoryResource, StaticLayout,
    StaticPlan,
};
use static_assertions::{assert_eq_size, assert_impl_all, assert_obj_safe};

// `device = ".."` expands to a `Device` constant returned by value from
// `&self` probes, and resources are shared across threads.
assert_impl_all!(Device: Copy, Send, Sync);
// The ledger is a field of resources, which must be `Send + Sync + Debug`.
assert_impl_all!(Ledger: Send, Sync, std::fmt::Debug, Default);
// Pointers cross the generated closures by value; they are one address.
assert_impl_all!(DevicePtr: Copy, Send, Sync);
assert_eq_size!(DevicePtr, usize);
// `layout!` builds these in `const` items and hands them out by value.
assert_impl_all!(StaticLayout<3>: Copy, Send, Sync, PartialEq);
assert_impl_all!(StaticPlan<3>: Copy);
assert_impl_all!(LayoutRuleError: Copy);
assert_impl_all!(DType: Copy, Send, Sync);
// Adaptors forward to `Arc<dyn MemoryResource>` upstreams and return
// `&dyn MemoryResource` from `upstream()`.
assert_obj_safe!(MemoryResource);
assert_impl_all!(Arc<dyn MemoryResource>: MemoryResource);

// The DLPack structs keep their C sizes on 64-bit targets (the header
// comparison in dlpack_abi.rs checks every field; this fails the build).
#[cfg(target_pointer_width = "64")]
mod dlpack_sizes {
    use devmm::dlpack::ffi::{
        DLDataType, DLDevice, DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, DLTensor,
    };
    use static_assertions::assert_eq_size;

    assert_eq_size!(DLDataType, [u8; 4]);
    assert_eq_size!(DLDevice, [u8; 8]);
    assert_eq_size!(DLPackVersion, [u8; 8]);
    assert_eq_size!(DLTensor, [u8; 48]);
    assert_eq_size!(DLManagedTensor, [u8; 64]);
    assert_eq_size!(DLManagedTensorVersioned, [u8; 80]);
}

/// `derive(Element)` reads `DTYPE` in a `const`; the primitives keep it.
const _: () = assert!(<f32 as Element>::DTYPE.itemsize() == 4);

/// The adaptor trait is usable as a bound with any resource upstream.
fn upstream_of<A: Adaptor>(adaptor: &A) -> &A::Upstream {
    adaptor.upstream()
}

#[test]
fn the_adaptor_trait_reaches_the_upstream_field() {
    #[devmm::memory_resource]
    #[derive(Debug)]
    struct Wrap(#[upstream] devmm::MallocMemoryResource);

    let wrap = Wrap(devmm::MallocMemoryResource::new());
    assert!(std::ptr::eq(upstream_of(&wrap), &wrap.0));
}
