//! Every policy form, in `const` and `let` position.

use devmm::{layout, StaticLayout};

const ROW: StaticLayout<2> = layout!(f32, [2, 3]);
const ROW_EXPLICIT: StaticLayout<2> = layout!(f32, [2, 3], row_major);
const COL: StaticLayout<3> = layout!(u8, [2, 3, 4], col_major,);
const NHWC: StaticLayout<4> = layout!(u8, [1, 3, 4, 5], permuted(0, 2, 3, 1));
const PADDED: StaticLayout<2> = layout!(f32, [4, 3], aligned(row_major, unit_stride = 128, base = 256));
const BASE_ONLY: StaticLayout<2> = layout!(f64, [4, 3], aligned(col_major, base = 64));
const SCALAR: StaticLayout<0> = layout!(i64, []);
// Any positive unit stride, as the seed's rule takes: rows pad to the least
// multiple of it and the element size (48 bytes; 8 for f64 under 4).
const ROWS_48: StaticLayout<2> = layout!(f32, [2, 3], aligned(row_major, unit_stride = 48, base = 64));
const FINER_THAN_ELEMENT: StaticLayout<2> = layout!(f64, [2, 3], aligned(row_major, unit_stride = 4));

fn main() {
    assert_eq!(ROW, ROW_EXPLICIT);
    assert_eq!(COL.strides(), &[1, 2, 6]);
    assert_eq!(NHWC.strides(), &[60, 1, 15, 3]);
    assert_eq!((PADDED.strides(), PADDED.required_nbytes()), (&[32, 1], 512));
    assert_eq!(BASE_ONLY.base_alignment(), 64);
    assert_eq!(SCALAR.required_nbytes(), 8);
    assert_eq!(ROWS_48.strides(), &[12, 1]);
    assert_eq!(FINER_THAN_ELEMENT.strides(), &[3, 1]);
    let local = layout!(u16, [7], aligned(permuted(0), unit_stride = 2usize, base = 2));
    assert_eq!(local.required_nbytes(), 14);
}
