use devmm::Element;

#[derive(Clone, Copy, Element)]
#[repr(C)]
#[element(dtype = "int32")]
enum Sign {
    Minus = -1,
    Plus = 1,
}

fn main() {}
