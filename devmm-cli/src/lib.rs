//! `devmm`: what devmm finds on this machine, and where memory goes.
//!
//! `devmm info` lists runtimes, devices, memory and the resource chain per
//! device; `devmm check` runs the conformance suites; `devmm bench` times
//! allocation and DLPack export through each resource stack; `devmm
//! replay` replays a recorded trace against a resource stack; `devmm plot`
//! draws a trace; `devmm snapshot` turns one into a PyTorch memory
//! snapshot. Each subcommand lives in its own module; this file only parses
//! the command line and turns failures into one line and an exit status.
//! The binary (`main.rs`) and the Python package's `devmm` command both
//! call [`run`].

mod bench;
mod check;
mod discovery;
mod error;
mod info;
mod plot;
mod progress;
mod replay;
mod report;
mod snapshot;
mod table;
mod units;

use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser, Subcommand};

use crate::error::CliError;

/// devmm: inspect the runtimes, devices and memory resources devmm finds.
#[derive(Debug, Parser)]
#[command(name = "devmm", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show runtimes, devices, memory and resource chains.
    ///
    /// Lists the runtimes found (and why each missing one is missing), the
    /// devices with their free and total memory, and the current resource
    /// chain of each device, outermost adaptor first.
    Info(info::InfoArgs),
    /// Run the conformance suites; exit non-zero on any failure.
    ///
    /// Runs mr_conformance against every available device's default
    /// resource and every shipped CPU resource (and the adaptors over it),
    /// and dlpack_conformance on every available device (or those named
    /// with --device), printing one pass/fail line per check.
    Check(check::CheckArgs),
    /// Measure allocation and DLPack export latency per resource stack.
    ///
    /// For every available device (or those named with --device), times
    /// allocate + deallocate pairs through each resource stack over a size
    /// sweep, and a DLPack export + delete of a small tensor from each
    /// stack, beside the raw allocator underneath (posix_memalign on the
    /// CPU, the platform resource on a GPU). Each figure is the median of
    /// --runs runs of --iters operations; a progress bar shows on a terminal.
    /// With --threads N every operation, the raw one too, runs on N threads
    /// at once. Build it in release (cargo run --release -p devmm-cli --
    /// bench): a debug build warns that its figures mean nothing.
    Bench(bench::BenchArgs),
    /// Replay a recorded trace against a resource stack.
    ///
    /// Reads a trace (rmm's logging_resource_adaptor CSV, or devmm's JSON
    /// lines), replays every allocate and free on one thread per recorded
    /// thread, in recorded order, through the resource stack the options
    /// name, and reports peak live bytes, failures and time per operation.
    /// Exits 1 when an allocation the trace made fails on replay (with
    /// --limit: the run would not have fit).
    Replay(replay::ReplayArgs),
    /// Draw live bytes over time from a trace, as HTML or SVG.
    ///
    /// One curve per device with its peak marked, and the call sites that
    /// allocated the most; one self-contained file (no scripts, no network).
    Plot(plot::PlotArgs),
    /// Write a trace as a PyTorch memory snapshot (pickle).
    ///
    /// What torch.cuda.memory._snapshot() writes, so PyTorch's viewer
    /// (python -m torch.cuda._memory_viz) shows memory PyTorch never
    /// allocated: the allocations live at the end of the trace as
    /// segments, the whole trace as device traces.
    Snapshot(snapshot::SnapshotArgs),
}

/// Runs the `devmm` command with `args` (the program name first, as
/// `std::env::args_os` gives them) and returns its exit status: what the
/// binary and the Python package's `devmm` command both call.
pub fn run<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    let result = match cli.command {
        Command::Info(args) => info::run(&args),
        Command::Check(args) => check::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Replay(args) => replay::run(&args),
        Command::Plot(args) => plot::run(&args),
        Command::Snapshot(args) => snapshot::run(&args),
    };
    match result {
        Ok(code) => code,
        // `devmm info | head`: the reader left; nothing more to say.
        Err(CliError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("devmm: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The exit status [`run`] returns as a number, for callers that hand it
/// on (the Python package's `sys.exit`).
pub fn run_status<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let code = run(args);
    // `ExitCode` is opaque; the command only ever returns these three.
    [0u8, 1, 2]
        .into_iter()
        .find(|n| ExitCode::from(*n) == code)
        .unwrap_or(1)
}

/// Help and version go out as clap renders them; every other parse error
/// becomes the first line of clap's message plus a pointer to `--help`, so
/// a script sees one line on stderr and exit status 2.
fn usage_error(e: &clap::Error) -> ExitCode {
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        // Printing help can only fail on a closed stdout, where there is no
        // one left to tell.
        let _ = e.print();
        return ExitCode::SUCCESS;
    }
    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        let names: Vec<String> = Cli::command()
            .get_subcommands()
            .map(|c| c.get_name().to_owned())
            .filter(|name| name != "help")
            .collect();
        eprintln!(
            "devmm: error: name a subcommand ({}); see 'devmm --help'",
            names.join(", ")
        );
        return ExitCode::from(2);
    }
    let rendered = e.render().to_string();
    let first = rendered.lines().next().unwrap_or("invalid arguments");
    let first = first.strip_prefix("error: ").unwrap_or(first);
    eprintln!("devmm: error: {first}; see 'devmm --help'");
    ExitCode::from(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_subcommand_and_flag_is_documented() {
        let cli = Cli::command();
        cli.clone().debug_assert();
        for sub in cli.get_subcommands().filter(|s| s.get_name() != "help") {
            assert!(sub.get_about().is_some(), "{} has no help", sub.get_name());
            for arg in sub.get_arguments() {
                assert!(
                    arg.get_help().is_some(),
                    "devmm {} --{} has no help",
                    sub.get_name(),
                    arg.get_id()
                );
            }
        }
    }
}
