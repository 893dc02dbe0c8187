//! Why a subcommand could not finish: the one-line message `main` prints.

/// A failure that ends the command with a non-zero exit status.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// devmm itself refused or failed.
    #[error(transparent)]
    Devmm(#[from] devmm::Error),
    /// A trace could not be read (the message names the file and line).
    #[error(transparent)]
    Trace(#[from] devmm::trace::TraceError),
    /// The report could not be written (closed pipe, full disk).
    #[error("cannot write the report: {0}")]
    Output(#[from] std::io::Error),
    /// The report could not be encoded as JSON.
    #[error("cannot encode the report as JSON: {0}")]
    Json(#[from] serde_json::Error),
}
