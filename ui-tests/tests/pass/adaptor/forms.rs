//! Adaptors: a bounded generic struct, a tuple struct, an adaptor over
//! `Arc<dyn MemoryResource>`, and one that writes every method itself.

use std::sync::Arc;

use devmm::{
    memory_resource, resource_chain, Device, DevicePtr, MallocMemoryResource, MemoryInfo,
    MemoryResource, Result, Stream,
};

#[memory_resource]
#[derive(Debug)]
struct Bounded<U: MemoryResource>(#[upstream] U);

#[memory_resource]
impl<U: MemoryResource> Bounded<U> {}

#[memory_resource]
#[derive(Debug)]
struct Shared {
    name: &'static str,
    #[upstream]
    inner: Arc<dyn MemoryResource>,
}

#[memory_resource]
impl Shared {
    fn available_memory(&self) -> Result<MemoryInfo> {
        let _ = self.name;
        Ok(MemoryInfo { free: 0, total: 0 })
    }
}

#[memory_resource]
#[derive(Debug)]
struct Everything<U> {
    #[upstream]
    inner: U,
}

#[memory_resource]
impl<U: MemoryResource> Everything<U> {
    fn allocate(&self, nbytes: usize, stream: &Stream) -> Result<DevicePtr> {
        self.inner.allocate(nbytes, stream)
    }

    unsafe fn deallocate(&self, ptr: DevicePtr, nbytes: usize, stream: &Stream) -> Result<()> {
        // SAFETY: forwarded; the caller upholds the contract.
        unsafe { self.inner.deallocate(ptr, nbytes, stream) }
    }

    fn device(&self) -> Device {
        self.inner.device()
    }

    fn stream_ordered(&self) -> bool {
        self.inner.stream_ordered()
    }

    fn guaranteed_alignment(&self) -> usize {
        self.inner.guaranteed_alignment()
    }

    fn available_memory(&self) -> Result<MemoryInfo> {
        self.inner.available_memory()
    }

    fn upstream(&self) -> Option<&dyn MemoryResource> {
        Some(&self.inner)
    }

    fn detects_misuse(&self) -> bool {
        false
    }

    fn live_count(&self) -> Option<usize> {
        None
    }
}

fn main() {
    let stack = Everything {
        inner: Bounded(Shared {
            name: "shared",
            inner: Arc::new(MallocMemoryResource::new()),
        }),
    };
    assert_eq!(
        resource_chain(&stack),
        "Everything -> Bounded -> Shared -> MallocMemoryResource(device=cpu:0, alignment=64)"
    );
    assert_eq!(stack.available_memory().unwrap().total, 0);
    let s = Stream::cpu();
    let p = stack.allocate(10, &s).unwrap();
    // SAFETY: p is live with 10 bytes.
    unsafe { stack.deallocate(p, 10, &s).unwrap() };
}
