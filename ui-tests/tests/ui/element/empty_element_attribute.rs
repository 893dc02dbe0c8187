use devmm::Element;

#[derive(Clone, Copy, Element)]
#[repr(transparent)]
#[element()]
struct Celsius(f32);

fn main() {}
