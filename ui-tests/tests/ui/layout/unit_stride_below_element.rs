use devmm::layout;

fn main() {
    let _ = layout!(f64, [2, 3], aligned(row_major, unit_stride = 4));
}
