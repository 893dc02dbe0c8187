use devmm::memory_resource;

#[memory_resource]
#[derive(Debug)]
struct Tee<U, V> {
    #[upstream]
    left: U,
    #[upstream]
    right: V,
}

fn main() {}
