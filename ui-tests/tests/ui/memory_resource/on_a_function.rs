#[devmm::memory_resource(device = "cpu", alignment = 64, debug = false)]
fn allocate(_nbytes: usize) {}

fn main() {}
