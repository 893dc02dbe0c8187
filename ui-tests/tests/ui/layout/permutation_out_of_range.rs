use devmm::layout;

fn main() {
    let _ = layout!(u8, [2, 3], permuted(0, 2));
}
