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

/// The arguments of a short `devmm bench`: `runs` runs of `iters`
/// iterations each, on sizes up to `max_size`, then `extra` (`--json`,
/// `--device`, `--threads`, ...).
#[allow(
    dead_code,
    reason = "only cli.rs runs the benchmark; traces.rs shares this module"
)]
pub(crate) fn bench_args<'a>(
    runs: &'a str,
    iters: &'a str,
    max_size: &'a str,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let common = [
        "bench",
        "--runs",
        runs,
        "--iters",
        iters,
        "--max-size",
        max_size,
    ];
    common.into_iter().chain(extra.iter().copied()).collect()
}
