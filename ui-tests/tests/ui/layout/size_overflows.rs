use devmm::layout;

fn main() {
    let _ = layout!(f64, [4611686018427387904, 8]);
}
