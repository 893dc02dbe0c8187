//! `#[repr(transparent)]` wrappers, named and tuple, used in a `layout!`.

use devmm::{layout, DType, Element};

#[derive(Clone, Copy, Element)]
#[repr(transparent)]
#[element(dtype = "float32")]
struct Celsius(f32);

#[derive(Clone, Copy, Element)]
#[repr(transparent)]
#[element(dtype = "uint16")]
struct Half {
    bits: u16,
}

fn main() {
    assert_eq!(Celsius::DTYPE, DType::FLOAT32);
    assert_eq!(Half::DTYPE, DType::UINT16);
    let _ = (Celsius(0.0).0, Half { bits: 0 }.bits);
    assert_eq!(layout!(Half, [3, 3], col_major).required_nbytes(), 18);
}
