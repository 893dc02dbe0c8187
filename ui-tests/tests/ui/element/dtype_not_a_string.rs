use devmm::Element;

#[derive(Clone, Copy, Element)]
#[repr(transparent)]
#[element(dtype = float32)]
struct Celsius(f32);

fn main() {}
