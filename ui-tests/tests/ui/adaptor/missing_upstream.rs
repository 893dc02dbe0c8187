use devmm::memory_resource;

#[memory_resource]
#[derive(Debug)]
struct Counting<U> {
    inner: U,
}

fn main() {}
