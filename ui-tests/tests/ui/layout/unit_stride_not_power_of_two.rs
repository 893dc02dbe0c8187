use devmm::layout;

fn main() {
    let _ = layout!(f32, [2, 3], aligned(row_major, unit_stride = 48, base = 64));
}
