use devmm::Element;

#[derive(Clone, Copy, Element)]
#[repr(transparent)]
struct Celsius(f32);

fn main() {}
