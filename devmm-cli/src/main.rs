//! `devmm`: what devmm finds on this machine.

fn main() {}
