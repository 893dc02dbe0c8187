//! `devmm bench`: what an allocate + deallocate pair costs through each
//! resource stack, across sizes, beside the raw allocator underneath.

use std::hint::black_box;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use devmm::{
    Device, HeapMemoryResource, LimitingAdaptor, MemoryResource, StatisticsAdaptor, Stream,
};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use crate::discovery;
use crate::error::CliError;
use crate::report::{self, Report};
use crate::table::{Align, Table};
use crate::units;

/// The alignment of the raw CPU baseline: the CPU resources' default.
const RAW_CPU_ALIGNMENT: usize = devmm::mrs::cpu::CPU_DEFAULT_ALIGNMENT;

/// Options of `devmm bench`.
#[derive(Debug, clap::Args)]
pub(crate) struct BenchArgs {
    /// Print the results as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Timed runs per figure; each figure is the median of the runs.
    #[arg(long, default_value_t = 11, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    runs: u32,
    /// Allocate + deallocate pairs per run; each run's figure is their mean.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    iters: u32,
    /// Smallest size of the sweep (bytes, or with a unit: 64, 4KiB, 1MiB).
    #[arg(long, default_value = "64", value_parser = units::parse_bytes)]
    min_size: usize,
    /// Largest size of the sweep; sizes go up by a factor of 4 from the smallest.
    #[arg(long, default_value = "64MiB", value_parser = units::parse_bytes)]
    max_size: usize,
    /// Measure only this device (repeatable); default: every available device.
    #[arg(long = "device", value_name = "DEVICE")]
    devices: Vec<Device>,
}

/// The allocator a stack's figure is set against.
enum Raw {
    /// `posix_memalign` / `free`, which `MallocMemoryResource` wraps.
    PosixMemalign,
    /// A device's platform allocator, reached through its default resource
    /// with no adaptor on top: the nearest raw call devmm exposes there.
    Platform(Arc<dyn MemoryResource>),
}

impl Raw {
    fn name(&self) -> String {
        match self {
            Raw::PosixMemalign => format!("posix_memalign({RAW_CPU_ALIGNMENT})+free"),
            Raw::Platform(mr) => devmm::resource_chain(&**mr),
        }
    }

    fn pair(&self, nbytes: usize, stream: &Stream) -> Result<(), CliError> {
        match self {
            Raw::PosixMemalign => {
                let mut out: *mut libc::c_void = std::ptr::null_mut();
                // SAFETY: `out` is a valid place for the result; the
                // alignment is a power of two multiple of the pointer size.
                let status =
                    unsafe { libc::posix_memalign(&mut out, RAW_CPU_ALIGNMENT, black_box(nbytes)) };
                if status != 0 {
                    return Err(CliError::Devmm(devmm::Error::OutOfMemory {
                        device: Device::CPU,
                        nbytes,
                        chain: self.name(),
                        detail: Some(format!("posix_memalign returned {status}")),
                    }));
                }
                // SAFETY: `out` came from posix_memalign (or is null) and is freed once.
                unsafe { libc::free(black_box(out)) };
                Ok(())
            }
            Raw::Platform(mr) => resource_pair(&**mr, nbytes, stream),
        }
    }
}

fn resource_pair(mr: &dyn MemoryResource, nbytes: usize, stream: &Stream) -> Result<(), CliError> {
    let ptr = mr.allocate(black_box(nbytes), stream)?;
    // SAFETY: `ptr` came from `mr.allocate(nbytes, stream)` and is freed once,
    // on the same stream, with nothing else using it.
    unsafe { mr.deallocate(black_box(ptr), nbytes, stream)? };
    Ok(())
}

/// One device's contenders: the raw allocator and the stacks over it.
struct Subject {
    device: Device,
    stream: Stream,
    raw: Raw,
    stacks: Vec<Arc<dyn MemoryResource>>,
}

fn subjects(args: &BenchArgs) -> Result<Vec<Subject>, CliError> {
    let mut subjects = Vec::new();
    for (rt, device) in discovery::select_devices(&args.devices)? {
        let default = rt.default_resource(device)?;
        let two_adaptors: Arc<dyn MemoryResource> = Arc::new(StatisticsAdaptor::new(
            LimitingAdaptor::new(Arc::clone(&default), usize::MAX),
        ));
        let (raw, stacks) = if device == Device::CPU {
            let heap: Arc<dyn MemoryResource> = Arc::new(HeapMemoryResource::new());
            (Raw::PosixMemalign, vec![default, heap, two_adaptors])
        } else {
            (
                Raw::Platform(Arc::clone(&default)),
                vec![default, two_adaptors],
            )
        };
        subjects.push(Subject {
            device,
            stream: rt.default_stream(device)?,
            raw,
            stacks,
        });
    }
    Ok(subjects)
}

/// The sweep: `min`, `4·min`, `16·min`, ... up to `max`.
fn sizes(min: usize, max: usize) -> Result<Vec<usize>, CliError> {
    if min == 0 || min > max {
        return Err(devmm::Error::InvalidArgument {
            reason: format!(
                "the size sweep needs 0 < --min-size <= --max-size, got {min} and {max}"
            ),
        }
        .into());
    }
    Ok(std::iter::successors(Some(min), |&n| n.checked_mul(4))
        .take_while(|&n| n <= max)
        .collect())
}

/// Median nanoseconds per pair over `runs`, each the mean of `iters` pairs.
fn median_ns(runs: &mut [f64]) -> f64 {
    runs.sort_by(f64::total_cmp);
    let mid = runs.len() / 2;
    if runs.len() % 2 == 1 {
        runs[mid]
    } else {
        (runs[mid - 1] + runs[mid]) / 2.0
    }
}

fn time_run(iters: u32, mut pair: impl FnMut() -> Result<(), CliError>) -> Result<f64, CliError> {
    let start = Instant::now();
    for _ in 0..iters {
        pair()?;
    }
    Ok(start.elapsed().as_nanos() as f64 / f64::from(iters))
}

/// One figure of the report.
#[derive(Debug, Serialize)]
struct Figure {
    device: String,
    /// The resource chain measured, outermost first.
    stack: String,
    nbytes: usize,
    /// Median nanoseconds per allocate + deallocate pair.
    median_ns: f64,
    /// The allocator beside it.
    raw: String,
    raw_median_ns: f64,
    /// `median_ns / raw_median_ns`.
    ratio: f64,
}

/// What `devmm bench` measured.
#[derive(Debug, Serialize)]
pub(crate) struct BenchReport {
    runs: u32,
    iters: u32,
    operation: &'static str,
    figures: Vec<Figure>,
}

fn progress(steps: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(steps);
    if let Ok(style) = ProgressStyle::with_template("{msg:>28} [{bar:30}] {pos}/{len}") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// Runs `devmm bench`.
pub(crate) fn run(args: &BenchArgs) -> Result<ExitCode, CliError> {
    let sizes = sizes(args.min_size, args.max_size)?;
    let subjects = subjects(args)?;
    let steps: usize = subjects.iter().map(|s| s.stacks.len() * sizes.len()).sum();
    let bar = progress(steps as u64);
    let mut figures = Vec::new();
    for subject in &subjects {
        for &nbytes in &sizes {
            bar.set_message(format!("{} {}", subject.device, units::bytes(nbytes)));
            // Raw and stacks take turns within each run, so load from other
            // processes falls on all of them alike and the ratios hold.
            let mut raw_runs = Vec::with_capacity(args.runs as usize);
            let mut stack_runs = vec![Vec::with_capacity(args.runs as usize); subject.stacks.len()];
            for _ in 0..args.runs {
                raw_runs.push(time_run(args.iters, || {
                    subject.raw.pair(nbytes, &subject.stream)
                })?);
                for (mr, runs) in subject.stacks.iter().zip(&mut stack_runs) {
                    runs.push(time_run(args.iters, || {
                        resource_pair(&**mr, nbytes, &subject.stream)
                    })?);
                }
            }
            let raw_median_ns = median_ns(&mut raw_runs);
            for (mr, mut runs) in subject.stacks.iter().zip(stack_runs) {
                let median_ns = median_ns(&mut runs);
                figures.push(Figure {
                    device: subject.device.to_string(),
                    stack: devmm::resource_chain(&**mr),
                    nbytes,
                    median_ns,
                    raw: subject.raw.name(),
                    raw_median_ns,
                    ratio: median_ns / raw_median_ns,
                });
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    let report = BenchReport {
        runs: args.runs,
        iters: args.iters,
        operation: "allocate+deallocate",
        figures,
    };
    report::emit(&report, args.json)?;
    Ok(ExitCode::SUCCESS)
}

impl Report for BenchReport {
    fn to_text(&self) -> String {
        let mut table = Table::new(&[
            ("DEVICE", Align::Left),
            ("SIZE", Align::Right),
            ("MEDIAN", Align::Right),
            ("RAW", Align::Right),
            ("RATIO", Align::Right),
            ("STACK", Align::Left),
        ]);
        let mut raws: Vec<(&str, &str)> = Vec::new();
        for f in &self.figures {
            if !raws.contains(&(f.device.as_str(), f.raw.as_str())) {
                raws.push((&f.device, &f.raw));
            }
            table.row(vec![
                f.device.clone(),
                units::bytes(f.nbytes),
                units::nanos(f.median_ns),
                units::nanos(f.raw_median_ns),
                format!("{:.2}x", f.ratio),
                f.stack.clone(),
            ]);
        }
        let mut text = format!(
            "{} latency: median of {} runs of {} pairs each\n",
            self.operation, self.runs, self.iters
        );
        for (device, raw) in raws {
            text.push_str(&format!("RAW on {device}: {raw}\n"));
        }
        text.push('\n');
        text.push_str(&table.render());
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sweep_goes_up_by_four_and_stops_at_the_maximum() {
        assert_eq!(sizes(64, 64 << 20).unwrap().len(), 11);
        assert_eq!(sizes(64, 1000).unwrap(), vec![64, 256]);
        assert_eq!(sizes(64, 64).unwrap(), vec![64]);
        assert!(sizes(0, 64).is_err());
        assert!(sizes(128, 64).is_err());
        assert_eq!(
            sizes(usize::MAX / 2, usize::MAX).unwrap(),
            vec![usize::MAX / 2]
        );
    }

    #[test]
    fn the_median_is_the_middle_run() {
        assert_eq!(median_ns(&mut [5.0, 1.0, 100.0]), 5.0);
        assert_eq!(median_ns(&mut [4.0, 1.0, 2.0, 100.0]), 3.0);
    }
}
