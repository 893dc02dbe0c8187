use devmm::memory_resource;

#[memory_resource(device = "cpu")]
#[derive(Debug)]
struct Counting<U> {
    #[upstream]
    inner: U,
}

fn main() {}
