use devmm::Element;

#[derive(Clone, Copy, Element)]
#[repr(transparent)]
#[element(dtype = "uint32")]
struct Letter(char);

fn main() {}
