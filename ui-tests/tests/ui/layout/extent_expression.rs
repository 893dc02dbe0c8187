use devmm::layout;

const N: usize = 4;

fn main() {
    let _ = layout!(f32, [N * 2, 3]);
}
