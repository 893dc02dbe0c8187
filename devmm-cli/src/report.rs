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
    if json {
        serde_json::to_writer_pretty(&mut out, report)?;
        writeln!(out)?;
    } else {
        out.write_all(report.to_text().as_bytes())?;
    }
    out.flush()?;
    Ok(())
}
