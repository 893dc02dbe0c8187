//! What the command's integration tests share.

use std::process::{Command, Output};

/// Runs the built `devmm` with `args`. Discovery must see every runtime,
/// whatever the caller's shell set, so `DEVMM_RUNTIME` is removed.
pub(crate) fn devmm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_devmm"))
        .args(args)
        .env_remove("DEVMM_RUNTIME")
        .output()
        .expect("the devmm binary runs")
}
