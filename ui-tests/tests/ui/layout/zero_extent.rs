use devmm::layout;

fn main() {
    let _ = layout!(f32, [2, 0, 3]);
}
