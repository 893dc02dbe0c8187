use devmm::layout;

fn main() {
    let _ = layout!(f32, [2, 3], aligned(row_major, base = 64, base = 128));
}
