//! Writing a subcommand's report: a table for people, JSON for programs.

use std::io::Write;

use serde::Serialize;

use crate::error::CliError;

/// A finished report that can be shown either way.
pub(crate) trait Report: Serialize {
    /// The human-readable form, ending in a newline.
    fn to_text(&self) -> String;
}

/// Writes `report` to stdout as pretty JSON (`json`) or as text.
pub(crate) fn emit(report: &impl Report, json: bool) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    // Rendered first, then written: a write error (a reader that left)
    // stays an output error, not a JSON encoding one.
    let text = if json {
        let mut json = serde_json::to_string_pretty(report)?;
        json.push('\n');
        json
    } else {
        report.to_text()
    };
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}
