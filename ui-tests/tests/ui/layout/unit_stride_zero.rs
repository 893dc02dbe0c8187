use devmm::layout;

fn main() {
    let _ = layout!(f32, [2, 3], aligned(row_major, unit_stride = 0, base = 64));
}
