use devmm::memory_resource;

#[memory_resource]
#[derive(Debug)]
struct Counting<U> {
    #[upstream(owned)]
    inner: U,
}

fn main() {}
