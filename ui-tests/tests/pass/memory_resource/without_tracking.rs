//! `debug = false`: no ledger, no bookkeeping; alignment is still checked.
//! The resource is generic.

use std::marker::PhantomData;

use devmm::{memory_resource, DevicePtr, MemoryResource, Result, Stream};

#[derive(Debug, Default)]
struct Typed<T> {
    marker: PhantomData<fn() -> T>,
}

#[memory_resource(device = "cpu", alignment = 16, debug = false)]
impl<T: std::fmt::Debug + 'static> Typed<T> {
    fn allocate(&self, _nbytes: usize) -> Result<DevicePtr> {
        Ok(DevicePtr::from_addr(std::mem::size_of::<T>()))
    }

    unsafe fn deallocate(&self, _ptr: DevicePtr, _nbytes: usize) -> Result<()> {
        Ok(())
    }
}

fn main() {
    let aligned = Typed::<[u8; 32]>::default();
    assert!(!aligned.detects_misuse());
    assert_eq!(aligned.live_count(), None);
    assert!(aligned.allocate(1, &Stream::cpu()).is_ok());
    let misaligned = Typed::<[u8; 8]>::default();
    assert!(misaligned.allocate(1, &Stream::cpu()).is_err());
}
