//! `devmm check`: the conformance suites against every available device's
//! default resource, every shipped CPU resource and every device's DLPack
//! export, one line per check.

use std::process::ExitCode;
use std::sync::Arc;

use devmm::testing::{
    dlpack_conformance, mr_conformance, CheckStatus, ConformanceReport, MrConformanceOptions,
};
use devmm::{
    Device, HeapMemoryResource, LimitingAdaptor, LoggingAdaptor, MallocMemoryResource,
    MemoryResource, StatisticsAdaptor,
};
use serde::Serialize;

use crate::discovery;
use crate::error::CliError;
use crate::report::{self, Report};
use crate::table::{Align, Table};

/// The budget of the limiting adaptor checked: far above what the suite
/// allocates, so only the adaptor's forwarding is on trial.
const CHECKED_LIMIT: usize = 1 << 30;

/// Options of `devmm check`.
#[derive(Debug, clap::Args)]
pub(crate) struct CheckArgs {
    /// Print the results as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Check only this device (repeatable); default: every available device.
    #[arg(long = "device", value_name = "DEVICE")]
    devices: Vec<Device>,
}

/// One check's outcome.
#[derive(Debug, Serialize)]
struct CheckLine {
    suite: String,
    /// The resource chain or device checked.
    subject: String,
    check: String,
    /// `passed`, `failed` or `skipped`.
    status: &'static str,
    /// Why it failed or was skipped.
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<String>,
}

/// What `devmm check` found.
#[derive(Debug, Serialize)]
pub(crate) struct CheckReport {
    passed: usize,
    failed: usize,
    skipped: usize,
    checks: Vec<CheckLine>,
}

impl CheckReport {
    fn from_suites(suites: &[ConformanceReport]) -> CheckReport {
        let checks: Vec<CheckLine> = suites
            .iter()
            .flat_map(|suite| {
                suite.checks().iter().map(|c| {
                    let (status, detail) = match &c.status {
                        CheckStatus::Passed => ("passed", None),
                        CheckStatus::Failed(why) => ("failed", Some(why.clone())),
                        CheckStatus::Skipped(why) => ("skipped", Some(why.clone())),
                    };
                    CheckLine {
                        suite: suite.suite().to_owned(),
                        subject: suite.subject().to_owned(),
                        check: c.name.to_owned(),
                        status,
                        detail,
                    }
                })
            })
            .collect();
        let count = |status: &str| checks.iter().filter(|c| c.status == status).count();
        CheckReport {
            passed: count("passed"),
            failed: count("failed"),
            skipped: count("skipped"),
            checks,
        }
    }

    fn exit_code(&self) -> ExitCode {
        if self.failed == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }
    }
}

/// The CPU resources devmm ships, and its adaptors over the malloc one.
fn shipped_cpu_resources() -> Vec<Box<dyn Fn() -> Arc<dyn MemoryResource>>> {
    vec![
        Box::new(|| Arc::new(MallocMemoryResource::new())),
        Box::new(|| Arc::new(HeapMemoryResource::new())),
        Box::new(|| Arc::new(StatisticsAdaptor::new(MallocMemoryResource::new()))),
        Box::new(|| {
            Arc::new(LimitingAdaptor::new(
                MallocMemoryResource::new(),
                CHECKED_LIMIT,
            ))
        }),
        Box::new(|| Arc::new(LoggingAdaptor::new(MallocMemoryResource::new()))),
    ]
}

/// Adds `suite` unless the same suite already ran on the same subject: the
/// CPU's default resource is also one of the shipped ones.
fn push_once(suite: ConformanceReport, suites: &mut Vec<ConformanceReport>) {
    if !suites
        .iter()
        .any(|s| s.suite() == suite.suite() && s.subject() == suite.subject())
    {
        suites.push(suite);
    }
}

/// Runs `devmm check`.
pub(crate) fn run(args: &CheckArgs) -> Result<ExitCode, CliError> {
    let devices = discovery::select_devices(&args.devices)?;
    let options = MrConformanceOptions::new();
    let mut suites: Vec<ConformanceReport> = Vec::new();
    for (rt, device) in &devices {
        push_once(
            mr_conformance(|| rt.default_resource(*device), &options),
            &mut suites,
        );
        if *device == Device::CPU {
            for make in shipped_cpu_resources() {
                push_once(mr_conformance(|| Ok(make()), &options), &mut suites);
            }
        }
        push_once(dlpack_conformance(*device), &mut suites);
    }
    let report = CheckReport::from_suites(&suites);
    report::emit(&report, args.json)?;
    Ok(report.exit_code())
}

impl Report for CheckReport {
    fn to_text(&self) -> String {
        let mut table = Table::new(&[
            ("RESULT", Align::Left),
            ("SUITE", Align::Left),
            ("CHECK", Align::Left),
            ("SUBJECT", Align::Left),
        ]);
        for c in &self.checks {
            let result = match c.status {
                "passed" => "PASS",
                "failed" => "FAIL",
                _ => "SKIP",
            };
            let subject = match &c.detail {
                Some(detail) => format!("{}: {detail}", c.subject),
                None => c.subject.clone(),
            };
            table.row(vec![
                result.into(),
                c.suite.clone(),
                c.check.clone(),
                subject,
            ]);
        }
        format!(
            "{}\n{} checks: {} passed, {} failed, {} skipped\n",
            table.render(),
            self.checks.len(),
            self.passed,
            self.failed,
            self.skipped
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use devmm::{DevicePtr, MemoryInfo, Stream};

    /// Promises page alignment but hands out addresses one cache line past
    /// a page boundary.
    #[derive(Debug)]
    struct OffByALine(MallocMemoryResource);

    const LINE: usize = 64;

    impl MemoryResource for OffByALine {
        fn allocate(&self, nbytes: usize, stream: &Stream) -> devmm::Result<DevicePtr> {
            if nbytes == 0 {
                return Ok(DevicePtr::NULL);
            }
            let padded = nbytes.checked_add(LINE).ok_or(devmm::Error::OutOfMemory {
                device: Device::CPU,
                nbytes,
                chain: "OffByALine".into(),
                detail: None,
                pool: None,
            })?;
            let page_aligned = self.0.allocate(padded, stream)?;
            Ok(DevicePtr::from_addr(page_aligned.addr() + LINE))
        }
        unsafe fn deallocate(
            &self,
            ptr: DevicePtr,
            nbytes: usize,
            s: &Stream,
        ) -> devmm::Result<()> {
            if ptr.is_null() {
                return Ok(());
            }
            let start = DevicePtr::from_addr(ptr.addr() - LINE);
            // SAFETY: `start` is what the inner resource returned for
            // `nbytes + LINE` bytes; the caller frees it once.
            unsafe { self.0.deallocate(start, nbytes + LINE, s) }
        }
        fn device(&self) -> Device {
            Device::CPU
        }
        fn guaranteed_alignment(&self) -> usize {
            4096
        }
        fn available_memory(&self) -> devmm::Result<MemoryInfo> {
            self.0.available_memory()
        }
    }

    #[test]
    fn a_broken_resource_fails_the_check_and_the_exit_status() {
        let suite = mr_conformance(
            || Ok(OffByALine(MallocMemoryResource::with_alignment(4096)?)),
            &MrConformanceOptions::new(),
        );
        let report = CheckReport::from_suites(&[suite]);
        assert!(report.failed > 0, "{report:?}");
        assert_eq!(report.exit_code(), ExitCode::FAILURE);
        let text = report.to_text();
        assert!(
            text.lines()
                .any(|l| l.starts_with("FAIL") && l.contains("alignment_honesty")),
            "{text}"
        );
    }

    #[test]
    fn the_cpu_passes_and_says_so() {
        let suites = [
            mr_conformance(
                || Ok(MallocMemoryResource::new()),
                &MrConformanceOptions::new(),
            ),
            dlpack_conformance(Device::CPU),
        ];
        let report = CheckReport::from_suites(&suites);
        assert_eq!(report.failed, 0, "{}", report.to_text());
        assert_eq!(report.exit_code(), ExitCode::SUCCESS);
        assert_eq!(report.passed + report.skipped, report.checks.len());
    }
}
