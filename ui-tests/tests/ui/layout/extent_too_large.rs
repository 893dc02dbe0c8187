use devmm::layout;

fn main() {
    let _ = layout!(f32, [2, 36893488147419103232]);
}
