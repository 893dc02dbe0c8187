use devmm::{memory_resource, DevicePtr, MemoryResource, Result, Stream};

#[memory_resource]
#[derive(Debug)]
struct Counting<U> {
    #[upstream]
    inner: U,
}

#[memory_resource]
impl<U: MemoryResource> Counting<U> {
    fn allocate(&self, nbytes: usize) -> Result<DevicePtr> {
        self.inner.allocate(nbytes, &Stream::cpu())
    }
}

fn main() {}
