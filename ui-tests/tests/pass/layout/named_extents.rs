//! Extents named by `usize` constants: const items (paths included) and
//! const generics, resolved at compile time as literals are.

use devmm::{layout, StaticLayout};

const ROWS: usize = 480;

mod camera {
    pub const COLS: usize = 640;
}

const IMAGE: StaticLayout<2> = layout!(f32, [ROWS, camera::COLS]);

struct Tile;

impl Tile {
    const SIDE: usize = 16;
    const LAYOUT: StaticLayout<2> = layout!(u8, [Self::SIDE, 3], col_major);
}

fn points<const N: usize>() -> StaticLayout<2> {
    layout!(f32, [N, 3], aligned(row_major, unit_stride = 16))
}

fn main() {
    assert_eq!(IMAGE, layout!(f32, [480, 640]));
    assert_eq!(Tile::LAYOUT.strides(), &[1, 16]);
    assert_eq!(points::<5>().shape(), &[5, 3]);
    assert_eq!(points::<5>().strides(), &[4, 1]);
}
