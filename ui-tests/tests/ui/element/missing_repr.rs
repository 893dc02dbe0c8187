use devmm::Element;

#[derive(Clone, Copy, Element)]
#[element(dtype = "float32")]
struct Celsius(f32);

fn main() {}
