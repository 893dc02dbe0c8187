use devmm::{memory_resource, Ledger};

#[derive(Debug, Default)]
struct Arena {
    ledger: Ledger,
}

#[memory_resource(device = "cpu", alignment = 64, ledger = ledger)]
impl Arena {
}

fn main() {}
