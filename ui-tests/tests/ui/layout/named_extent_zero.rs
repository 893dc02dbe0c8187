use devmm::layout;

const EMPTY: usize = 0;

fn main() {
    let _ = layout!(f32, [EMPTY, 3]);
}
