use devmm::{memory_resource, DevicePtr, MemoryResource, Result, Stream};

#[derive(Debug)]
struct Counting<U> {
    inner: U,
}

#[memory_resource]
impl<U: MemoryResource> Counting<U> {
    fn allocate(&self, nbytes: usize, stream: &Stream) -> Result<DevicePtr> {
        self.inner.allocate(nbytes, stream)
    }
}

fn main() {}
