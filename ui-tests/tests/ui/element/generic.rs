use devmm::Element;

#[derive(Clone, Copy, Element)]
#[repr(transparent)]
#[element(dtype = "float32")]
struct Wrapper<T>(T);

fn main() {}
