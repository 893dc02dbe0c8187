//! Allocation traces: every allocate, allocate failure and free, one line
//! each, as [`TraceAdaptor`](crate::TraceAdaptor) writes them and as
//! `devmm replay`, `devmm plot` and the PyTorch snapshot export read them.
//!
//! Two formats. [`TraceFormat::Csv`] is exactly the CSV that rmm's
//! `logging_resource_adaptor` writes (`Thread,Time,Action,Pointer,Size,Stream`,
//! actions `allocate`, `allocate failure`, `free`), so traces move between
//! the two projects in both directions. [`TraceFormat::JsonLines`] adds the
//! device, a full timestamp and the call site.
//!
//! ```
//! use devmm::trace::{parse_trace, Action};
//! let csv = "Thread,Time,Action,Pointer,Size,Stream\n\
//!            7,10:00:00.000001,allocate,0x1000,64,0\n\
//!            7,10:00:00.000002,free,0x1000,64,0\n";
//! let events = parse_trace(csv, "rmm.csv")?;
//! assert_eq!(events[1].action, Action::Free);
//! assert_eq!(devmm::trace::Timeline::of(&events).peak_bytes(), 64);
//!
//! let bad = "Thread,Time,Action,Pointer,Size,Stream\n7,10:00:00.000001,free,0x1000,64,0\n";
//! let error = parse_trace(bad, "bad.csv").unwrap_err();
//! assert_eq!(error.to_string(), "bad.csv:2: free of 0x1000, which no earlier line allocated");
//! # Ok::<(), devmm::trace::TraceError>(())
//! ```

mod csv;
mod jsonl;
mod pickle;
mod timeline;
mod torch;

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::callsite::Frame;
use crate::device::Device;
use crate::ledger::AddressMap;

pub use timeline::{DeviceTimeline, UNKNOWN_SITE};
pub use timeline::{Sample, SiteTotal, Timeline};
pub use torch::{LiveBlock, TorchSnapshot, torch_snapshot_of_trace};

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// An allocation succeeded.
    Allocate,
    /// An allocation was refused (the pointer is null).
    AllocateFailure,
    /// A pointer was given back.
    Free,
}

impl Action {
    /// The word rmm writes: `allocate`, `allocate failure`, `free`.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Allocate => "allocate",
            Action::AllocateFailure => "allocate failure",
            Action::Free => "free",
        }
    }

    fn parse(word: &str) -> Option<Action> {
        match word {
            "allocate" => Some(Action::Allocate),
            "allocate failure" => Some(Action::AllocateFailure),
            "free" => Some(Action::Free),
            _ => None,
        }
    }
}

/// One line of a trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceEvent {
    /// The line it was read from (1 is a CSV's header), 0 when made in memory.
    pub line: usize,
    /// The recording thread's id (the OS thread id on Linux, as rmm's).
    pub thread: u64,
    /// Nanoseconds since the Unix epoch (JSON lines), or since midnight UTC
    /// (rmm's CSV carries the time of day only); never decreasing in a
    /// trace read back.
    pub time_ns: u64,
    /// What happened.
    pub action: Action,
    /// The address allocated or freed (0 for a failure).
    pub ptr: usize,
    /// The bytes asked for or given back.
    pub nbytes: usize,
    /// The stream's native handle.
    pub stream: usize,
    /// The device, when the format records it (JSON lines).
    pub device: Option<Device>,
    /// The call site, innermost frame first, when recorded.
    pub frames: Vec<Frame>,
}

/// The two trace formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceFormat {
    /// rmm's `logging_resource_adaptor` CSV.
    Csv,
    /// One JSON object a line, with device and call site.
    JsonLines,
}

impl std::str::FromStr for TraceFormat {
    type Err = crate::Error;

    /// `"csv"` or `"jsonl"`, the names bindings and files use.
    ///
    /// ```
    /// use devmm::trace::TraceFormat;
    /// assert_eq!("jsonl".parse::<TraceFormat>()?, TraceFormat::JsonLines);
    /// assert!("xml".parse::<TraceFormat>().is_err());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    fn from_str(name: &str) -> crate::Result<Self> {
        match name {
            "csv" => Ok(TraceFormat::Csv),
            "jsonl" => Ok(TraceFormat::JsonLines),
            other => Err(crate::Error::Refused {
                reason: format!("unknown trace format {other:?}: use \"csv\" (rmm's) or \"jsonl\""),
            }),
        }
    }
}

/// A trace that cannot be read: where, and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// A line that is not a trace event, or an event the lines before it
    /// contradict.
    #[error("{origin}:{line}: {reason}")]
    Malformed {
        /// The file (or name) the trace came from.
        origin: String,
        /// The 1-based line.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// The file could not be read.
    #[error("cannot read the trace {origin}: {source}")]
    Io {
        /// The file.
        origin: String,
        /// Why.
        source: std::io::Error,
    },
}

/// Reads the trace in `path` (either format, told apart by its first line).
pub fn read_trace(path: &Path) -> Result<Vec<TraceEvent>, TraceError> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| TraceError::Io {
        origin: origin.clone(),
        source,
    })?;
    parse_trace(&text, &origin)
}

/// Parses a trace held in memory; `origin` names it in errors. Checks that
/// every free matches a live allocation of the same size, and that no
/// address is allocated twice without a free between.
pub fn parse_trace(text: &str, origin: &str) -> Result<Vec<TraceEvent>, TraceError> {
    let malformed = |line: usize, reason: String| TraceError::Malformed {
        origin: origin.to_owned(),
        line,
        reason,
    };
    let first = text.lines().find(|l| !l.trim().is_empty());
    let format = match first {
        None => return Err(malformed(1, "the trace is empty".into())),
        Some(l) if l.trim_start().starts_with('{') => TraceFormat::JsonLines,
        Some(l) if l.trim() == csv::HEADER => TraceFormat::Csv,
        Some(l) => {
            return Err(malformed(
                1,
                format!(
                    "expected rmm's CSV header {:?} or a JSON object, found {:?}",
                    csv::HEADER,
                    l.trim()
                ),
            ));
        }
    };
    // One event a line: sized once rather than grown (and copied) twenty
    // times over a million-line trace.
    let mut events = Vec::with_capacity(text.bytes().filter(|&b| b == b'\n').count() + 1);
    let mut header_seen = false;
    let mut checks = Checks::new(format);
    // The lines as `str::lines` cuts them (at `\n`, less one `\r`),
    // numbered from 1; a CSV line as rmm writes it is read as it is found.
    let (mut rest, mut line) = (text, 0);
    while !rest.is_empty() {
        line += 1;
        let plain = match format {
            TraceFormat::Csv if header_seen => csv::parse_plain_prefix(rest),
            _ => None,
        };
        let mut event = match plain {
            Some((event, read)) => {
                rest = &rest[read..];
                event
            }
            None => {
                let text = match rest.split_once('\n') {
                    Some((text, next)) => {
                        rest = next;
                        text
                    }
                    None => std::mem::take(&mut rest),
                };
                let text = text.strip_suffix('\r').unwrap_or(text);
                if blank(text) {
                    continue;
                }
                let parsed = match format {
                    TraceFormat::Csv if !header_seen => {
                        header_seen = true;
                        continue;
                    }
                    TraceFormat::Csv => csv::parse_line(text),
                    TraceFormat::JsonLines => jsonl::parse_line(text),
                };
                parsed.map_err(|reason| malformed(line, reason))?
            }
        };
        event.line = line;
        checks.take(&mut event);
        events.push(event);
    }
    checks
        .finish()
        .map_err(|(line, reason)| malformed(line, reason))?;
    Ok(events)
}

/// The checks of a trace's events, made as each is read rather than in
/// passes over them all after (each pass over a million 88-byte events
/// cost more time than its instructions). The error they report is the one
/// the passes reported: a line that does not read is returned at once by
/// the reader; of the rest, the first clock that ran out, else the first
/// contradiction.
struct Checks {
    /// Settles rmm's times of day (CSV only).
    clock: Option<Clock>,
    live: LiveAllocations,
    clock_error: Option<(usize, String)>,
    live_error: Option<(usize, String)>,
}

impl Checks {
    fn new(format: TraceFormat) -> Checks {
        Checks {
            clock: (format == TraceFormat::Csv).then(Clock::default),
            live: LiveAllocations::default(),
            clock_error: None,
            live_error: None,
        }
    }

    /// Settles `event`'s time and checks it against the events before; only
    /// the first error of each kind is kept, as the passes stopped there.
    fn take(&mut self, event: &mut TraceEvent) {
        if let (None, Some(clock)) = (&self.clock_error, &mut self.clock) {
            self.clock_error = clock.settle(event).err();
        }
        if self.live_error.is_none() {
            self.live_error = self.live.check(event).err();
        }
    }

    fn finish(self) -> Result<(), (usize, String)> {
        match self.clock_error.or(self.live_error) {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

/// Whether `line` is empty or white space only; a line that starts with
/// printable ASCII (every event) is told without `str::trim`.
fn blank(line: &str) -> bool {
    match line.as_bytes().first() {
        Some(byte) if byte.is_ascii_graphic() => false,
        _ => line.trim().is_empty(),
    }
}

/// rmm's CSV has the time of day only: a trace that runs past midnight
/// goes back by almost a day, which means one day later. A trace that
/// passes midnight more often than 64-bit nanoseconds count (about 213,500
/// days) is refused at the line where the clock runs out, not wrapped.
#[derive(Default)]
struct Clock {
    /// Days passed, in nanoseconds.
    offset: u64,
    /// The last settled time.
    previous: u64,
}

impl Clock {
    fn settle(&mut self, event: &mut TraceEvent) -> Result<(), (usize, String)> {
        const DAY_NS: u64 = 86_400_000_000_000;
        let (line, days) = (event.line, self.offset / DAY_NS);
        let out_of_clock = move || {
            (
                line,
                format!(
                    "the time of day went back past midnight {} times before this line, more \
                     days than 64-bit nanoseconds count: split the trace",
                    days
                ),
            )
        };
        let settled = event
            .time_ns
            .checked_add(self.offset)
            .ok_or_else(out_of_clock)?;
        // Compared without adding half a day to a time near the top.
        let settled = match self.previous.saturating_sub(settled) > DAY_NS / 2 {
            true => {
                self.offset = self.offset.checked_add(DAY_NS).ok_or_else(out_of_clock)?;
                settled.checked_add(DAY_NS).ok_or_else(out_of_clock)?
            }
            false => settled,
        };
        event.time_ns = settled;
        self.previous = settled;
        Ok(())
    }
}

/// Per device, address -> (size, line) of the live allocations, hashed as
/// the ledgers hash addresses (SipHash of a device and address pair was a
/// tenth of a replay). Null pointers (zero-byte allocations) may be live
/// many times over.
#[derive(Default)]
struct LiveAllocations {
    devices: Vec<(Option<Device>, Live)>,
}

/// One device's live allocations: address -> (size, line).
type Live = AddressMap<(usize, usize)>;

impl LiveAllocations {
    /// Checks `e` against the allocations live before it, and records it:
    /// every free matches a live allocation of its size, no address is
    /// allocated twice without a free between.
    fn check(&mut self, e: &TraceEvent) -> Result<(), (usize, String)> {
        if e.ptr == 0 {
            if e.action != Action::AllocateFailure && e.nbytes != 0 {
                return Err((
                    e.line,
                    format!(
                        "{} of {} bytes at a null pointer",
                        e.action.as_str(),
                        e.nbytes
                    ),
                ));
            }
            return Ok(());
        }
        let devices = &mut self.devices;
        let at = match devices.iter().position(|(device, _)| *device == e.device) {
            Some(at) => at,
            None => {
                devices.push((e.device, AddressMap::default()));
                devices.len() - 1
            }
        };
        let live = &mut devices[at].1;
        let key = e.ptr;
        match e.action {
            Action::AllocateFailure => {}
            Action::Allocate => {
                if let Some((_, earlier)) = live.insert(key, (e.nbytes, e.line)) {
                    return Err((
                        e.line,
                        format!(
                            "allocate of {:#x}, which line {earlier} allocated and no line freed",
                            e.ptr
                        ),
                    ));
                }
            }
            Action::Free => match live.remove(&key) {
                None => {
                    return Err((
                        e.line,
                        format!("free of {:#x}, which no earlier line allocated", e.ptr),
                    ));
                }
                Some((nbytes, earlier)) if nbytes != e.nbytes => {
                    return Err((
                        e.line,
                        format!(
                            "free of {:#x} with {} bytes, but line {earlier} allocated {nbytes}",
                            e.ptr, e.nbytes
                        ),
                    ));
                }
                Some(_) => {}
            },
        }
        Ok(())
    }
}

/// Nanoseconds since the Unix epoch of `time` (0 before the epoch).
pub(crate) fn epoch_ns(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Formats one event in `format`, newline included: what
/// [`TraceAdaptor`](crate::TraceAdaptor) writes.
pub fn format_event(format: TraceFormat, event: &TraceEvent) -> String {
    match format {
        TraceFormat::Csv => csv::format_line(event),
        TraceFormat::JsonLines => jsonl::format_line(event),
    }
}

/// The first line of a trace file in `format` (rmm's header for CSV,
/// nothing for JSON lines).
pub fn header(format: TraceFormat) -> Option<&'static str> {
    match format {
        TraceFormat::Csv => Some(csv::HEADER),
        TraceFormat::JsonLines => None,
    }
}

/// The calling thread's id as traces record it: the OS thread id on Linux
/// (what rmm's logger writes), a process-wide counter elsewhere.
pub fn current_thread_id() -> u64 {
    thread_local! {
        static ID: u64 = os_thread_id();
    }
    ID.with(|id| *id)
}

#[cfg(target_os = "linux")]
fn os_thread_id() -> u64 {
    // SAFETY: gettid has no preconditions and cannot fail.
    let tid = unsafe { libc::gettid() };
    u64::try_from(tid).unwrap_or_default()
}

#[cfg(not(target_os = "linux"))]
fn os_thread_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
