use devmm::layout;

fn main() {
    let _ = layout!(u8, [2, 3, 4], permuted(1, 0));
}
