use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Once, Weak};
use std::time::SystemTime;

use crate::callsite::{CallSite, Frame};
use crate::device::Device;
use crate::error::Result;
use crate::ptr::DevicePtr;
use crate::resource::{MemoryInfo, MemoryResource};
use crate::stream::Stream;
use crate::trace::{LiveBlock, TorchSnapshot};

/// The environment variable that, set to `1`, prints a leak report of every
/// [`TrackingAdaptor`] that still has live allocations when it is dropped
/// or when the process exits.
pub const LEAK_REPORT_ENV: &str = "DEVMM_LEAK_REPORT";

/// The call-site depth [`TrackingAdaptor::new`] captures.
pub const DEFAULT_TRACKING_DEPTH: usize = 32;

/// One allocation made through a [`TrackingAdaptor`] and not yet freed.
#[derive(Clone, Debug)]
pub struct LiveAllocation {
    /// Its address.
    pub ptr: DevicePtr,
    /// Bytes asked for.
    pub nbytes: usize,
    /// The stream's native handle.
    pub stream: usize,
    /// When it was made.
    pub time: SystemTime,
    /// The allocating thread, as traces number threads.
    pub thread: u64,
    /// The allocating thread's name, if it had one.
    pub thread_name: Option<Arc<str>>,
    /// Where it was made (resolved on demand).
    pub site: CallSite,
}

/// What a tracking adaptor shares with the exit-time report.
#[derive(Debug)]
struct Ledger {
    device: Device,
    chain: Mutex<String>,
    live: Mutex<HashMap<usize, LiveAllocation>>,
    /// Set once its report is printed, so it prints once.
    reported: AtomicBool,
}

/// Records every live allocation with its size, stream, time, thread and
/// call site (a native backtrace, and the Python stack for calls from
/// Python), and reports what is still live grouped by call site.
///
/// Capturing a call site costs one unwind of at most `depth` frames;
/// symbols are looked up only when a report asks (docs/benchmarks.md has
/// the figures). With `DEVMM_LEAK_REPORT=1` in the environment, an adaptor
/// dropped with live allocations, or still alive at process exit, prints
/// its [`report`](Self::report) to stderr.
///
/// ```
/// use devmm::{MallocMemoryResource, MemoryResource, Stream, TrackingAdaptor};
/// let mr = TrackingAdaptor::new(MallocMemoryResource::new());
/// let s = Stream::cpu();
/// let kept = mr.allocate(256, &s)?;
/// let freed = mr.allocate(64, &s)?;
/// unsafe { mr.deallocate(freed, 64, &s)? };
/// let leaks = mr.leaks();
/// assert_eq!((leaks.len(), leaks[0].nbytes), (1, 256));
/// let report = mr.report();
/// assert_eq!((report.live_allocations(), report.live_bytes()), (1, 256));
/// println!("{report}"); // 256 B in 1 allocation at <file>:<line> in <function> ...
/// # unsafe { mr.deallocate(kept, 256, &s)? };
/// # Ok::<(), devmm::Error>(())
/// ```
pub struct TrackingAdaptor<U> {
    upstream: super::upstream::Upstream<U>,
    depth: usize,
    ledger: Arc<Ledger>,
    report_on_drop: bool,
    probes: super::UpstreamProbes,
}

impl<U: fmt::Debug> fmt::Debug for TrackingAdaptor<U> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "TrackingAdaptor(depth={}, upstream={:?})",
            self.depth, self.upstream
        )
    }
}

impl<U: MemoryResource> TrackingAdaptor<U> {
    /// Wraps `upstream`, capturing call sites [`DEFAULT_TRACKING_DEPTH`] frames deep.
    pub fn new(upstream: U) -> Self {
        TrackingAdaptor::with_depth(upstream, DEFAULT_TRACKING_DEPTH)
    }

    /// Wraps `upstream`, capturing at most `depth` native frames per
    /// allocation (0: none; devmm's own frames on the allocation path count).
    pub fn with_depth(upstream: U, depth: usize) -> Self {
        let ledger = Arc::new(Ledger {
            device: upstream.device(),
            chain: Mutex::new(String::new()),
            live: Mutex::new(HashMap::new()),
            reported: AtomicBool::new(false),
        });
        let report_on_drop = leak_report_requested();
        if report_on_drop {
            watch_at_exit(&ledger);
        }
        let adaptor = TrackingAdaptor {
            upstream: super::upstream::Upstream::new(upstream),
            depth,
            ledger,
            report_on_drop,
            probes: super::UpstreamProbes::new(),
        };
        *lock(&adaptor.ledger.chain) = crate::resource_chain(&adaptor);
        adaptor
    }

    /// The wrapped resource.
    pub fn get_upstream(&self) -> &U {
        &self.upstream
    }

    /// Every live allocation, oldest first.
    pub fn leaks(&self) -> Vec<LiveAllocation> {
        self.ledger.leaks()
    }

    /// Bytes allocated through the adaptor and not yet freed.
    pub fn live_bytes(&self) -> usize {
        lock(&self.ledger.live).values().map(|a| a.nbytes).sum()
    }

    /// The live allocations grouped by call site, most live bytes first.
    pub fn report(&self) -> LeakReport {
        self.ledger.report()
    }

    /// The live allocations as a PyTorch memory snapshot.
    pub fn torch_snapshot(&self) -> TorchSnapshot {
        let blocks: Vec<LiveBlock> = self
            .leaks()
            .into_iter()
            .map(|a| LiveBlock {
                device: Some(self.ledger.device),
                ptr: a.ptr.addr(),
                nbytes: a.nbytes,
                stream: a.stream,
                frames: a.site.frames(),
            })
            .collect();
        TorchSnapshot::new(&blocks, &[])
    }
}

impl<U: MemoryResource> MemoryResource for TrackingAdaptor<U> {
    fn allocate(&self, nbytes: usize, stream: &Stream) -> Result<DevicePtr> {
        let site = CallSite::capture(self.depth);
        let ptr = self
            .upstream
            .allocate(nbytes, stream)
            .map_err(|e| e.through("TrackingAdaptor"))?;
        // A null zero-byte allocation holds nothing and may recur.
        if !ptr.is_null() {
            let record = LiveAllocation {
                ptr,
                nbytes,
                stream: stream.handle(),
                time: SystemTime::now(),
                thread: crate::trace::current_thread_id(),
                thread_name: current_thread_name(),
                site,
            };
            lock(&self.ledger.live).insert(ptr.addr(), record);
        }
        Ok(ptr)
    }

    unsafe fn deallocate(&self, ptr: DevicePtr, nbytes: usize, stream: &Stream) -> Result<()> {
        super::check_deallocation(self, ptr, nbytes)?;
        // Out of the ledger before the upstream has the address back: once
        // it does, another thread may be handed the same address and record
        // it, and removing afterwards would drop that record instead.
        let record = lock(&self.ledger.live).remove(&ptr.addr());
        // SAFETY: forwarded verbatim; the caller upholds the contract.
        let freed = unsafe { self.upstream.deallocate(ptr, nbytes, stream) };
        if let (Err(_), Some(record)) = (&freed, record) {
            // Refused (a misuse the upstream caught): still live.
            lock(&self.ledger.live).insert(ptr.addr(), record);
        }
        freed
    }

    forward_probes!(upstream: U, probes);

    fn available_memory(&self) -> Result<MemoryInfo> {
        self.upstream.available_memory()
    }
}

impl<U> Drop for TrackingAdaptor<U> {
    fn drop(&mut self) {
        if self.report_on_drop {
            self.ledger.print_if_leaking();
        }
    }
}

impl Ledger {
    fn leaks(&self) -> Vec<LiveAllocation> {
        sorted(&lock(&self.live))
    }

    fn report(&self) -> LeakReport {
        self.report_of(self.leaks(), lock(&self.chain).clone())
    }

    /// The report, or `None` when another thread holds the ledger: at
    /// process exit that thread may never let go, so waiting could hang.
    fn try_report(&self) -> Option<LeakReport> {
        let leaks = sorted(&*try_lock(&self.live)?);
        let chain = try_lock(&self.chain)?.clone();
        Some(self.report_of(leaks, chain))
    }

    fn report_of(&self, leaks: Vec<LiveAllocation>, chain: String) -> LeakReport {
        let mut groups: Vec<SiteGroup> = Vec::new();
        let mut index: HashMap<Option<Frame>, usize> = HashMap::new();
        for leak in leaks {
            let frames = leak.site.frames();
            let key = frames.first().cloned();
            let at = *index.entry(key).or_insert_with(|| {
                groups.push(SiteGroup {
                    frames,
                    allocations: 0,
                    bytes: 0,
                });
                groups.len() - 1
            });
            groups[at].allocations += 1;
            groups[at].bytes = groups[at].bytes.saturating_add(leak.nbytes);
        }
        groups.sort_by_key(|g| std::cmp::Reverse(g.bytes));
        LeakReport {
            device: self.device,
            chain,
            groups,
        }
    }

    fn print_if_leaking(&self) {
        self.print(self.report());
    }

    fn print(&self, report: LeakReport) {
        if report.live_allocations() > 0 && !self.reported.swap(true, Ordering::Relaxed) {
            eprintln!("{report}");
        }
    }
}

/// The live allocations, oldest first.
fn sorted(live: &HashMap<usize, LiveAllocation>) -> Vec<LiveAllocation> {
    let mut leaks: Vec<LiveAllocation> = live.values().cloned().collect();
    leaks.sort_by_key(|a| (a.time, a.ptr));
    leaks
}

/// Live allocations that share a call site.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteGroup {
    /// The call site, innermost frame first (empty when not captured).
    pub frames: Vec<Frame>,
    /// How many allocations are live there.
    pub allocations: usize,
    /// Their bytes.
    pub bytes: usize,
}

/// A tracking adaptor's live allocations by call site, most bytes first.
/// `Display` writes the report people read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeakReport {
    /// The adaptor's device.
    pub device: Device,
    /// The adaptor's resource chain.
    pub chain: String,
    /// The call sites, most live bytes first.
    pub groups: Vec<SiteGroup>,
}

impl LeakReport {
    /// Live allocations in all.
    pub fn live_allocations(&self) -> usize {
        self.groups.iter().map(|g| g.allocations).sum()
    }

    /// Live bytes in all.
    pub fn live_bytes(&self) -> usize {
        self.groups.iter().map(|g| g.bytes).sum()
    }
}

/// The frames shown under each call site, after the innermost.
const REPORT_CONTEXT_FRAMES: usize = 4;

impl fmt::Display for LeakReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = self.live_allocations();
        writeln!(
            f,
            "devmm leak report: {count} live allocation{} ({} bytes) on {} through {}",
            if count == 1 { "" } else { "s" },
            self.live_bytes(),
            self.device,
            self.chain
        )?;
        for group in &self.groups {
            let plural = if group.allocations == 1 { "" } else { "s" };
            match group.frames.split_first() {
                Some((top, rest)) => {
                    writeln!(
                        f,
                        "  {} bytes in {} allocation{plural} at {top}",
                        group.bytes, group.allocations
                    )?;
                    for frame in rest.iter().take(REPORT_CONTEXT_FRAMES) {
                        writeln!(f, "      called from {frame}")?;
                    }
                }
                None => writeln!(
                    f,
                    "  {} bytes in {} allocation{plural} at an unknown call site \
                     (captured with depth 0, or without debug symbols)",
                    group.bytes, group.allocations
                )?,
            }
        }
        Ok(())
    }
}

/// The calling thread's name, looked up once per thread (a thread's name
/// never changes).
fn current_thread_name() -> Option<Arc<str>> {
    thread_local! {
        static NAME: Option<Arc<str>> = std::thread::current().name().map(Arc::from);
    }
    NAME.with(Clone::clone)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The lock if it is free now (poisoned is fine: see `lock`).
fn try_lock<T>(m: &Mutex<T>) -> Option<std::sync::MutexGuard<'_, T>> {
    match m.try_lock() {
        Ok(guard) => Some(guard),
        Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

fn leak_report_requested() -> bool {
    std::env::var_os(LEAK_REPORT_ENV).is_some_and(|v| v == "1")
}

/// The ledgers the exit-time report looks at.
static WATCHED: Mutex<Vec<Weak<Ledger>>> = Mutex::new(Vec::new());

fn watch_at_exit(ledger: &Arc<Ledger>) {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        // SAFETY: `report_at_exit` is a plain `extern "C" fn()` that never
        // unwinds (it catches panics) and touches only Rust statics.
        if unsafe { libc::atexit(report_at_exit) } != 0 {
            tracing::error!(
                target: "devmm::tracking",
                "could not register the leak report at exit (atexit failed); call \
                 devmm::print_leak_reports before the process ends"
            );
        }
    });
    let mut watched = lock(&WATCHED);
    watched.retain(|w| w.strong_count() > 0);
    watched.push(Arc::downgrade(ledger));
}

extern "C" fn report_at_exit() {
    let _ = std::panic::catch_unwind(print_leak_reports_at_exit);
}

/// As [`print_leak_reports`], taking no lock another thread holds: at exit
/// that thread may be stopped mid-allocation, and a busy ledger is skipped
/// rather than waited for.
fn print_leak_reports_at_exit() {
    let Some(watched) = try_lock(&WATCHED) else {
        return;
    };
    let ledgers: Vec<Arc<Ledger>> = watched.iter().filter_map(Weak::upgrade).collect();
    drop(watched);
    for ledger in ledgers {
        if let Some(report) = ledger.try_report() {
            ledger.print(report);
        }
    }
    if leak_report_requested() {
        print_foreign_if_held();
    }
}

/// Prints, once each, the leak report of every [`TrackingAdaptor`] made
/// with [`LEAK_REPORT_ENV`]`=1` that is alive and has live allocations:
/// what runs at process exit. An embedding interpreter calls it before it
/// tears its objects down (the Python package does, from `atexit`), so the
/// report shows what the program still held when it ended.
///
/// ```
/// devmm::print_leak_reports(); // nothing tracked here: prints nothing
/// ```
pub fn print_leak_reports() {
    let ledgers: Vec<Arc<Ledger>> = lock(&WATCHED).iter().filter_map(Weak::upgrade).collect();
    for ledger in ledgers {
        ledger.print_if_leaking();
    }
    if leak_report_requested() {
        print_foreign_if_held();
    }
}

/// Memory devmm holds but did not allocate (DLPack imports, adopted
/// buffers) is part of the picture at exit: reported once, apart from the
/// tracked allocations, because its producer, not a devmm resource, frees it.
fn print_foreign_if_held() {
    static REPORTED: AtomicBool = AtomicBool::new(false);
    let held = crate::foreign::foreign_memory();
    if held.live_count > 0 && !REPORTED.swap(true, Ordering::Relaxed) {
        eprintln!(
            "devmm leak report: {} foreign buffer{} ({} bytes) still held: DLPack imports or adopted \
             memory, released by their producers when devmm lets go, never by a devmm resource",
            held.live_count,
            if held.live_count == 1 { "" } else { "s" },
            held.live_bytes
        );
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    /// Runs the exit path on another thread: whether it returned in time.
    fn exit_path_returns() -> bool {
        let (done, finished) = mpsc::channel();
        std::thread::spawn(move || {
            report_at_exit();
            let _ = done.send(());
        });
        finished.recv_timeout(Duration::from_secs(5)).is_ok()
    }

    #[test]
    fn the_exit_path_skips_what_another_thread_holds() {
        let ledger = Arc::new(Ledger {
            device: crate::Device::CPU,
            chain: Mutex::new("Test".into()),
            live: Mutex::new(HashMap::new()),
            reported: AtomicBool::new(false),
        });
        lock(&WATCHED).push(Arc::downgrade(&ledger));
        let busy = lock(&ledger.live);
        assert!(exit_path_returns(), "a busy ledger is skipped");
        drop(busy);
        let watched = lock(&WATCHED);
        assert!(exit_path_returns(), "a busy watch list is skipped");
        drop(watched);
        assert!(ledger.try_report().is_some());
    }
}
