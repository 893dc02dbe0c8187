//! `devmm bench`: what an allocate + deallocate pair costs through each
//! resource stack, across sizes, and what a DLPack export of a tensor from
//! each stack costs, each beside the raw allocator underneath; with
//! `--threads N`, the same on N threads at once.

use std::hint::black_box;
use std::process::ExitCode;
use std::sync::{Arc, Barrier, Mutex};
use std::time::Instant;

use devmm::dlpack::DlpackRequest;
use devmm::{
    DType, Device, EmptyOptions, HeapMemoryResource, LimitingAdaptor, MemoryResource,
    StatisticsAdaptor, Stream, Tensor,
};
use serde::Serialize;

use crate::discovery;
use crate::error::CliError;
use crate::progress;
use crate::report::{self, Report};
use crate::table::{Align, Table};
use crate::units;

/// The alignment of the raw CPU baseline: the CPU resources' default.
const RAW_CPU_ALIGNMENT: usize = devmm::mrs::cpu::CPU_DEFAULT_ALIGNMENT;

/// The tensor exported: a small 2-D float32 (its size does not matter to
/// the export, which never touches the data).
const EXPORT_SHAPE: [usize; 2] = [8, 8];

/// The raw pair an export is set against: one small host block, as the
/// export allocates one host block for its managed struct, shape and strides.
const EXPORT_RAW_NBYTES: usize = 64;

const ALLOCATE: &str = "allocate+deallocate";
const EXPORT: &str = "dlpack export+delete";

/// Options of `devmm bench`.
#[derive(Debug, clap::Args)]
pub(crate) struct BenchArgs {
    /// Print the results as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Timed runs per figure; each figure is the median of the runs.
    #[arg(long, default_value_t = 11, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    runs: u32,
    /// Operations per run; each run's figure is their mean.
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
    /// Run every operation on this many threads at once (the raw call
    /// too), each doing --iters of them per run; figures are wall time per
    /// operation per thread, so RAW / MEDIAN is the throughput ratio.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    threads: u32,
}

/// How this binary was compiled: figures from a debug build say nothing
/// about devmm's speed (it runs 30 to 50 times slower).
const BUILD: &str = if cfg!(debug_assertions) {
    "debug"
} else {
    "release"
};

/// What `devmm bench` prints on stderr when it is a debug build.
pub(crate) const DEBUG_BUILD_WARNING: &str = "warning: this devmm is a DEBUG build: \
its figures are not devmm's speed; build it with --release \
(cargo run --release -p devmm-cli -- bench)";

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
                        pool: None,
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
        let counted: Arc<dyn MemoryResource> =
            Arc::new(StatisticsAdaptor::new(Arc::clone(&default)));
        let two_adaptors: Arc<dyn MemoryResource> = Arc::new(StatisticsAdaptor::new(
            LimitingAdaptor::new(Arc::clone(&default), usize::MAX),
        ));
        let (raw, stacks) = if device == Device::CPU {
            let heap: Arc<dyn MemoryResource> = Arc::new(HeapMemoryResource::new());
            (
                Raw::PosixMemalign,
                vec![default, heap, counted, two_adaptors],
            )
        } else {
            (
                Raw::Platform(Arc::clone(&default)),
                vec![default, counted, two_adaptors],
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

fn time_run(iters: u32, pair: impl Fn() -> Result<(), CliError>) -> Result<f64, CliError> {
    let start = Instant::now();
    for _ in 0..iters {
        pair()?;
    }
    Ok(start.elapsed().as_nanos() as f64 / f64::from(iters))
}

/// One figure of the report.
#[derive(Debug, Serialize)]
struct Figure {
    /// `allocate+deallocate` or `dlpack export+delete`.
    operation: &'static str,
    device: String,
    /// The resource chain measured, outermost first.
    stack: String,
    /// Bytes allocated, or the exported tensor's bytes.
    nbytes: usize,
    /// Median nanoseconds per operation.
    median_ns: f64,
    /// The allocator beside it, and the bytes of its allocate + free pair.
    raw: String,
    raw_nbytes: usize,
    raw_median_ns: f64,
    /// `median_ns / raw_median_ns`.
    ratio: f64,
}

/// What `devmm bench` measured.
#[derive(Debug, Serialize)]
pub(crate) struct BenchReport {
    /// `release`, or `debug` (whose figures mean nothing).
    build: &'static str,
    runs: u32,
    iters: u32,
    /// Threads running each operation at once.
    threads: u32,
    figures: Vec<Figure>,
}

/// One operation a race times: the raw call or a contender.
type Entrant<'a> = &'a (dyn Fn() -> Result<(), CliError> + Sync);

/// Times `contenders` against `raw`, taking turns within each run so load
/// from other processes falls on all of them alike; returns the median of
/// `raw` and of each contender.
fn race<C: Sync>(
    args: &BenchArgs,
    raw: impl Fn() -> Result<(), CliError> + Sync,
    contenders: &[C],
    op: impl Fn(&C) -> Result<(), CliError> + Sync,
) -> Result<(f64, Vec<f64>), CliError> {
    let op = &op;
    let each: Vec<_> = contenders.iter().map(|c| move || op(c)).collect();
    let mut entrants: Vec<Entrant<'_>> = vec![&raw];
    entrants.extend(each.iter().map(|e| e as Entrant<'_>));
    let mut runs = if args.threads == 1 {
        time_alone(args, &entrants)?
    } else {
        time_on_threads(args, &entrants)?
    };
    let mut medians = runs.iter_mut().map(|r| median_ns(r));
    let raw_median = medians.next().unwrap_or(f64::NAN);
    Ok((raw_median, medians.collect()))
}

/// Every run of every entrant, in turns, on this thread.
fn time_alone(args: &BenchArgs, entrants: &[Entrant<'_>]) -> Result<Vec<Vec<f64>>, CliError> {
    let mut runs = vec![Vec::with_capacity(args.runs as usize); entrants.len()];
    for _ in 0..args.runs {
        for (entrant, runs) in entrants.iter().zip(&mut runs) {
            runs.push(time_run(args.iters, entrant)?);
        }
    }
    Ok(runs)
}

/// Every run of every entrant, in turns, each on `--threads` threads
/// started together; a run's figure is its wall time over `--iters`.
fn time_on_threads(args: &BenchArgs, entrants: &[Entrant<'_>]) -> Result<Vec<Vec<f64>>, CliError> {
    let threads = args.threads as usize;
    // The workers and this thread meet before and after every run, so
    // the clock runs exactly while all of them work.
    let (start, end) = (Barrier::new(threads + 1), Barrier::new(threads + 1));
    let failure: Mutex<Option<CliError>> = Mutex::new(None);
    let failed = || failure.lock().unwrap_or_else(|e| e.into_inner()).is_some();
    let mut runs = vec![Vec::with_capacity(args.runs as usize); entrants.len()];
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                for _ in 0..args.runs {
                    for entrant in entrants {
                        // Checked outside the timed window; after a failure
                        // the workers only keep the meetings.
                        let skip = failed();
                        start.wait();
                        if !skip {
                            if let Err(e) = (0..args.iters).try_for_each(|_| entrant()) {
                                *failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                            }
                        }
                        end.wait();
                    }
                }
            });
        }
        for _ in 0..args.runs {
            for runs in &mut runs {
                start.wait();
                let began = Instant::now();
                end.wait();
                runs.push(began.elapsed().as_nanos() as f64 / f64::from(args.iters));
            }
        }
    });
    match failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
        Some(e) => Err(e),
        None => Ok(runs),
    }
}

/// A tensor from `mr` and the request that exports it without waiting on
/// any stream, so the figure is the export and deleter alone.
fn export_subject(
    mr: &Arc<dyn MemoryResource>,
    stream: &Stream,
) -> Result<(Tensor, DlpackRequest), CliError> {
    let options = EmptyOptions::new()
        .resource(Arc::clone(mr))
        .stream(stream.clone());
    let tensor = devmm::empty(&EXPORT_SHAPE, DType::FLOAT32, &options)?;
    let request = DlpackRequest::new().max_version(1, 1);
    // "No synchronization" is -1 where there are streams; devices without
    // them (the CPU) take no stream value at all.
    let request = if tensor.device() == devmm::Device::CPU {
        request
    } else {
        request.stream(-1)
    };
    Ok((tensor, request))
}

/// Runs `devmm bench`.
pub(crate) fn run(args: &BenchArgs) -> Result<ExitCode, CliError> {
    let sizes = sizes(args.min_size, args.max_size)?;
    let subjects = subjects(args)?;
    // After the arguments are checked, so a refusal stays one line.
    if cfg!(debug_assertions) {
        eprintln!("{DEBUG_BUILD_WARNING}");
    }
    let steps: usize = subjects
        .iter()
        .map(|s| s.stacks.len() * (sizes.len() + 1))
        .sum();
    let bar = progress::bar(steps as u64);
    let mut figures = Vec::new();
    for subject in &subjects {
        let device = subject.device.to_string();
        for &nbytes in &sizes {
            bar.set_message(format!("{device} {}", units::bytes(nbytes)));
            let (raw_median_ns, medians) = race(
                args,
                || subject.raw.pair(nbytes, &subject.stream),
                &subject.stacks,
                |mr| resource_pair(&**mr, nbytes, &subject.stream),
            )?;
            for (mr, median_ns) in subject.stacks.iter().zip(medians) {
                figures.push(Figure {
                    operation: ALLOCATE,
                    device: device.clone(),
                    stack: devmm::resource_chain(&**mr),
                    nbytes,
                    median_ns,
                    raw: subject.raw.name(),
                    raw_nbytes: nbytes,
                    raw_median_ns,
                    ratio: median_ns / raw_median_ns,
                });
                bar.inc(1);
            }
        }
        bar.set_message(format!("{device} export"));
        let exports = subject
            .stacks
            .iter()
            .map(|mr| export_subject(mr, &subject.stream))
            .collect::<Result<Vec<_>, _>>()?;
        let host = Raw::PosixMemalign;
        let (raw_median_ns, medians) = race(
            args,
            || host.pair(EXPORT_RAW_NBYTES, &subject.stream),
            &exports,
            |(tensor, request)| {
                drop(black_box(tensor.to_dlpack(request)?));
                Ok(())
            },
        )?;
        for ((mr, (tensor, _)), median_ns) in subject.stacks.iter().zip(&exports).zip(medians) {
            figures.push(Figure {
                operation: EXPORT,
                device: device.clone(),
                stack: devmm::resource_chain(&**mr),
                nbytes: tensor.buffer().nbytes(),
                median_ns,
                raw: host.name(),
                raw_nbytes: EXPORT_RAW_NBYTES,
                raw_median_ns,
                ratio: median_ns / raw_median_ns,
            });
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let report = BenchReport {
        build: BUILD,
        runs: args.runs,
        iters: args.iters,
        threads: args.threads,
        figures,
    };
    report::emit(&report, args.json)?;
    Ok(ExitCode::SUCCESS)
}

impl Report for BenchReport {
    fn to_text(&self) -> String {
        let mut table = Table::new(&[
            ("OPERATION", Align::Left),
            ("DEVICE", Align::Left),
            ("SIZE", Align::Right),
            ("MEDIAN", Align::Right),
            ("RAW", Align::Right),
            ("RATIO", Align::Right),
            ("STACK", Align::Left),
        ]);
        let mut raws: Vec<(&str, &str, &str)> = Vec::new();
        for f in &self.figures {
            let raw = (f.operation, f.device.as_str(), f.raw.as_str());
            if !raws.contains(&raw) {
                raws.push(raw);
            }
            table.row(vec![
                f.operation.to_owned(),
                f.device.clone(),
                units::bytes(f.nbytes),
                units::nanos(f.median_ns),
                units::nanos(f.raw_median_ns),
                format!("{:.2}x", f.ratio),
                f.stack.clone(),
            ]);
        }
        let mut text = if self.build == "release" {
            String::new()
        } else {
            format!("{DEBUG_BUILD_WARNING}\n")
        };
        text.push_str(&format!(
            "Latency: median of {} runs of {} operations each; RATIO = MEDIAN / RAW\n",
            self.runs, self.iters
        ));
        if self.threads > 1 {
            text.push_str(&format!(
                "On {} threads at once: MEDIAN and RAW are wall time per operation per thread; RAW / MEDIAN is the throughput ratio\n",
                self.threads
            ));
        }
        for (operation, device, raw) in raws {
            let size = if operation == EXPORT {
                format!(" of {}", units::bytes(EXPORT_RAW_NBYTES))
            } else {
                " of the same size".to_owned()
            };
            text.push_str(&format!("RAW for {operation} on {device}: {raw}{size}\n"));
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
