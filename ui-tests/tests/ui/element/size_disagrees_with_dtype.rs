use devmm::Element;

#[derive(Clone, Copy, Element)]
#[repr(C)]
#[element(dtype = "float32")]
struct Point {
    x: f32,
    y: f32,
}

fn main() {}
