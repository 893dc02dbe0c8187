use devmm::layout;

fn main() {
    let _ = layout!(f32, [2, 3], aligned);
}
