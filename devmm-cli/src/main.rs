//! The `devmm` binary: the command-line front of `devmm_cli::run`.

use std::process::ExitCode;

fn main() -> ExitCode {
    devmm_cli::run(std::env::args_os())
}
