//! What a conformance suite found: one named outcome per check.

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// How one check ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckStatus {
    /// The subject met the contract.
    Passed,
    /// The subject broke the contract; the text says how.
    Failed(String),
    /// The check does not apply (the subject makes no such promise).
    Skipped(String),
}

/// One named check and how it ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckOutcome {
    /// The check's stable name (`"write_read_exact"`).
    pub name: &'static str,
    /// Its outcome.
    pub status: CheckStatus,
}

/// The outcome of a conformance suite: every check by name.
///
/// ```
/// use devmm::testing::{mr_conformance, MrConformanceOptions};
/// let report = mr_conformance(|| Ok(devmm::HeapMemoryResource::new()), &MrConformanceOptions::new());
/// assert!(report.is_ok(), "{report}");
/// assert!(report.checks().iter().any(|c| c.name == "misuse_detection"));
/// report.into_result()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConformanceReport {
    suite: &'static str,
    subject: String,
    checks: Vec<CheckOutcome>,
}

/// The body of a check: `Ok(None)` passed, `Ok(Some(reason))` skipped,
/// `Err(text)` failed.
pub(crate) type CheckResult = Result<Option<String>, String>;

impl ConformanceReport {
    pub(crate) fn new(suite: &'static str, subject: String) -> ConformanceReport {
        ConformanceReport {
            suite,
            subject,
            checks: Vec::new(),
        }
    }

    /// Runs one check; a panic inside it is a failure, not a crash of the suite.
    pub(crate) fn run(&mut self, name: &'static str, check: impl FnOnce() -> CheckResult) {
        let status = match catch_unwind(AssertUnwindSafe(check)) {
            Ok(Ok(None)) => CheckStatus::Passed,
            Ok(Ok(Some(reason))) => CheckStatus::Skipped(reason),
            Ok(Err(failure)) => CheckStatus::Failed(failure),
            Err(panic) => CheckStatus::Failed(format!(
                "panicked instead of returning an error: {}",
                panic_text(panic.as_ref())
            )),
        };
        self.push(name, status);
    }

    /// Adds the outcome of a check a binding runs itself, one the core
    /// cannot ask (a negative size, which Python's `allocate` takes and
    /// the core's unsigned sizes cannot express), so it is reported with
    /// the suite's own.
    ///
    /// ```
    /// use devmm::testing::{mr_conformance, CheckStatus, MrConformanceOptions};
    /// let factory = || Ok(devmm::HeapMemoryResource::new());
    /// let mut report = mr_conformance(factory, &MrConformanceOptions::new());
    /// report.push("negative_size", CheckStatus::Failed("-1 was accepted".into()));
    /// assert!(report.to_string().contains("negative_size"), "{report}");
    /// assert!(!report.is_ok());
    /// ```
    pub fn push(&mut self, name: &'static str, status: CheckStatus) {
        self.checks.push(CheckOutcome { name, status });
    }

    /// The suite that ran (`"mr_conformance"`, `"dlpack_conformance"`).
    pub fn suite(&self) -> &str {
        self.suite
    }

    /// What was tested (a resource chain, a device).
    pub fn subject(&self) -> &str {
        &self.subject
    }

    /// Every check, in the order run.
    pub fn checks(&self) -> &[CheckOutcome] {
        &self.checks
    }

    /// The checks that failed.
    pub fn failures(&self) -> impl Iterator<Item = &CheckOutcome> {
        self.checks
            .iter()
            .filter(|c| matches!(c.status, CheckStatus::Failed(_)))
    }

    /// Whether no check failed.
    pub fn is_ok(&self) -> bool {
        self.failures().next().is_none()
    }

    /// `Ok(self)` when no check failed, else the failure (which displays
    /// every failed check), for `?` in tests.
    pub fn into_result(self) -> Result<ConformanceReport, ConformanceFailure> {
        if self.is_ok() {
            Ok(self)
        } else {
            Err(ConformanceFailure { report: self })
        }
    }
}

impl fmt::Display for ConformanceReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count =
            |want: fn(&CheckStatus) -> bool| self.checks.iter().filter(|c| want(&c.status)).count();
        write!(
            f,
            "{} of {} ({} of {} checks passed; {} failed; {} skipped)",
            self.suite,
            self.subject,
            count(|s| *s == CheckStatus::Passed),
            self.checks.len(),
            count(|s| matches!(s, CheckStatus::Failed(_))),
            count(|s| matches!(s, CheckStatus::Skipped(_))),
        )?;
        for check in &self.checks {
            match &check.status {
                CheckStatus::Passed => {}
                CheckStatus::Failed(why) => write!(f, "\n  FAILED {}: {why}", check.name)?,
                CheckStatus::Skipped(why) => write!(f, "\n  skipped {}: {why}", check.name)?,
            }
        }
        Ok(())
    }
}

/// A report with at least one failed check, as an error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConformanceFailure {
    report: ConformanceReport,
}

impl ConformanceFailure {
    /// The whole report.
    pub fn report(&self) -> &ConformanceReport {
        &self.report
    }
}

impl fmt::Display for ConformanceFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "conformance violated: {}", self.report)
    }
}

impl std::error::Error for ConformanceFailure {}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-text panic payload".to_owned())
}

/// Fails the check with `message` unless `condition` holds.
pub(crate) fn ensure(condition: bool, message: impl FnOnce() -> String) -> Result<(), String> {
    if condition { Ok(()) } else { Err(message()) }
}
