//! `devmm snapshot`: a trace as a PyTorch memory snapshot.

use std::path::PathBuf;
use std::process::ExitCode;

use devmm::trace::{read_trace, torch_snapshot_of_trace};

use crate::error::CliError;

/// Options of `devmm snapshot`.
#[derive(Debug, clap::Args)]
pub(crate) struct SnapshotArgs {
    /// The trace: rmm's CSV or devmm's JSON lines.
    trace: PathBuf,
    /// The pickle to write (what torch.cuda.memory._dump_snapshot writes).
    #[arg(short, long, default_value = "snapshot.pickle")]
    output: PathBuf,
}

/// Runs `devmm snapshot`.
pub(crate) fn run(args: &SnapshotArgs) -> Result<ExitCode, CliError> {
    let snapshot = torch_snapshot_of_trace(&read_trace(&args.trace)?);
    snapshot
        .write(&args.output)
        .map_err(|e| devmm::Error::InvalidArgument {
            reason: format!("cannot write {}: {e}", args.output.display()),
        })?;
    eprintln!(
        "devmm: wrote {} ({} live allocation(s)); view it with python -m torch.cuda._memory_viz",
        args.output.display(),
        snapshot.segment_count()
    );
    Ok(ExitCode::SUCCESS)
}
