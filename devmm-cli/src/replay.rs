//! `devmm replay`: a recorded trace replayed against a resource stack, its
//! recorded threads interleaved on a bounded set of OS threads, to see its
//! peak, its failures and what each operation costs there.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use devmm::trace::{read_trace, Action, TraceEvent};
use devmm::{
    Device, DevicePtr, HeapMemoryResource, LimitingAdaptor, LoggingAdaptor, MallocMemoryResource,
    MemoryResource, StatisticsAdaptor, Stream, TrackingAdaptor,
};
use serde::Serialize;

use crate::error::CliError;
use crate::report::{self, Report};
use crate::table::{Align, Table};
use crate::{progress, units};

/// The resource at the bottom of the replayed stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Base {
    /// The device's default resource (its runtime's choice).
    Default,
    /// MallocMemoryResource (CPU only).
    Malloc,
    /// HeapMemoryResource, which detects misuse (CPU only).
    Heap,
}

/// An adaptor over the base.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Layer {
    /// LoggingAdaptor (tracing events).
    Logging,
    /// TrackingAdaptor (call sites of live allocations).
    Tracking,
    /// StatisticsAdaptor.
    Statistics,
}

/// Options of `devmm replay`.
#[derive(Debug, clap::Args)]
pub(crate) struct ReplayArgs {
    /// The trace: rmm's CSV (Thread,Time,Action,Pointer,Size,Stream) or devmm's JSON lines.
    trace: PathBuf,
    /// The device to replay on.
    #[arg(long, default_value = "cpu:0")]
    device: Device,
    /// The resource at the bottom of the stack.
    #[arg(long, value_enum, default_value = "default")]
    resource: Base,
    /// Adaptors over it, outermost first (repeatable).
    #[arg(long = "adaptor", value_enum, value_name = "ADAPTOR")]
    adaptors: Vec<Layer>,
    /// Refuse allocations past this many live bytes (bytes, or with a unit: 8GiB), as a smaller device would.
    #[arg(long, value_parser = units::parse_bytes)]
    limit: Option<usize>,
    /// Print the results as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// What `devmm replay` found.
#[derive(Debug, Serialize)]
pub(crate) struct ReplayReport {
    trace: String,
    /// The stack replayed against, outermost first (the replay's own
    /// statistics adaptor on top).
    stack: String,
    events: usize,
    /// Threads the trace recorded.
    threads: usize,
    /// OS threads the replay interleaved them on (at most
    /// [`MAX_REPLAY_THREADS`]).
    replay_threads: usize,
    /// Peak live bytes the trace itself records.
    recorded_peak_bytes: usize,
    /// Peak live bytes on replay.
    peak_bytes: usize,
    /// Allocations the trace made that failed on replay.
    failures: usize,
    /// Allocations the trace records as failed (not replayed).
    recorded_failures: usize,
    /// Allocations the trace never freed (freed after the replay).
    unfreed: usize,
    allocations: usize,
    frees: usize,
    /// Mean nanoseconds per allocate and per free on replay (each kind's
    /// first 64 per replay thread timed, then one in 16).
    allocate_mean_ns: f64,
    free_mean_ns: f64,
    wall_ns: u128,
}

impl Report for ReplayReport {
    fn to_text(&self) -> String {
        let mut table = Table::new(&[("", Align::Left), ("", Align::Left)]);
        let rows = [
            ("trace", self.trace.clone()),
            ("stack", self.stack.clone()),
            ("events", self.events.to_string()),
            ("threads", self.threads.to_string()),
            ("replayed on", format!("{} OS threads", self.replay_threads)),
            ("recorded peak", units::bytes(self.recorded_peak_bytes)),
            ("replayed peak", units::bytes(self.peak_bytes)),
            ("allocations", self.allocations.to_string()),
            ("frees", self.frees.to_string()),
            ("failed on replay", self.failures.to_string()),
            ("failed when recorded", self.recorded_failures.to_string()),
            ("never freed", self.unfreed.to_string()),
            ("time per allocate", units::nanos(self.allocate_mean_ns)),
            ("time per free", units::nanos(self.free_mean_ns)),
        ];
        for (name, value) in rows {
            table.row(vec![name.to_owned(), value]);
        }
        // The header row of an untitled table is blank: leave it out.
        let text = table.render();
        let body = text
            .split_once('\n')
            .map_or(text.as_str(), |(_, rest)| rest);
        let mut out = body.to_owned();
        if self.failures > 0 {
            out.push_str(&format!(
                "{} allocation(s) failed on replay: the trace does not fit this stack\n",
                self.failures
            ));
        }
        out
    }
}

fn stack(args: &ReplayArgs) -> Result<Arc<dyn MemoryResource>, CliError> {
    let cpu_only = |name: &str| -> Result<(), CliError> {
        if args.device == Device::CPU {
            return Ok(());
        }
        Err(devmm::Error::InvalidArgument {
            reason: format!(
                "--resource {name} is a CPU resource, but --device is {}; use --resource default",
                args.device
            ),
        }
        .into())
    };
    let mut mr: Arc<dyn MemoryResource> = match args.resource {
        Base::Default => devmm::runtime_for(args.device)?.default_resource(args.device)?,
        Base::Malloc => {
            cpu_only("malloc")?;
            Arc::new(MallocMemoryResource::new())
        }
        Base::Heap => {
            cpu_only("heap")?;
            Arc::new(HeapMemoryResource::new())
        }
    };
    if let Some(limit) = args.limit {
        mr = Arc::new(LimitingAdaptor::new(mr, limit));
    }
    for layer in args.adaptors.iter().rev() {
        mr = match layer {
            Layer::Logging => Arc::new(LoggingAdaptor::new(mr)),
            Layer::Tracking => Arc::new(TrackingAdaptor::new(mr)),
            Layer::Statistics => Arc::new(StatisticsAdaptor::new(mr)),
        };
    }
    Ok(mr)
}

/// What became of one recorded allocation on replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    /// Its thread has not replayed it yet.
    Pending,
    /// Replayed: the pointer to free.
    Live(DevicePtr),
    /// Failed on replay, or already freed.
    Gone,
}

/// The allocations of the trace, shared by the replay threads: a free on
/// one recorded thread of what another allocated waits until that
/// allocation has been replayed. Every wait is on an earlier line of the
/// trace, and each recorded thread replays its lines in trace order, so the
/// earliest line not yet replayed can always go on: the replay cannot
/// deadlock, however the recorded threads share the OS threads.
struct Slots {
    state: Mutex<SlotState>,
    changed: Condvar,
}

struct SlotState {
    slots: Vec<Slot>,
    /// Bumped on every change, so a replay thread that found nothing to do
    /// sleeps only until something changed since it looked.
    changes: u64,
    /// Threads asleep in [`Slots::wait_for_change`]: a change wakes them
    /// only when there are some (a wake is a `futex` call, which on every
    /// allocation cost more than the allocation).
    sleepers: usize,
}

impl SlotState {
    /// [`Slots::try_take`], under its lock or where no other thread is.
    fn take(&mut self, slot: usize) -> Result<Option<DevicePtr>, u64> {
        if self.slots[slot] == Slot::Pending {
            return Err(self.changes);
        }
        Ok(match std::mem::replace(&mut self.slots[slot], Slot::Gone) {
            Slot::Live(ptr) => Some(ptr),
            _ => None,
        })
    }
}

/// The slots as a replay thread uses them: shared behind their lock
/// (`&Slots`), or, when one OS thread replays the one recorded thread,
/// the table itself (`&mut SlotState`), without a lock and an unlock
/// around every operation.
trait SlotTable {
    fn set(&mut self, slot: usize, value: Slot);
    fn try_take(&mut self, slot: usize) -> Result<Option<DevicePtr>, u64>;
    fn wait_for_change(&mut self, seen: u64);
}

impl SlotTable for &Slots {
    fn set(&mut self, slot: usize, value: Slot) {
        Slots::set(self, slot, value);
    }

    fn try_take(&mut self, slot: usize) -> Result<Option<DevicePtr>, u64> {
        Slots::try_take(self, slot)
    }

    fn wait_for_change(&mut self, seen: u64) {
        Slots::wait_for_change(self, seen);
    }
}

impl SlotTable for &mut SlotState {
    fn set(&mut self, slot: usize, value: Slot) {
        self.slots[slot] = value;
        self.changes = self.changes.wrapping_add(1);
    }

    fn try_take(&mut self, slot: usize) -> Result<Option<DevicePtr>, u64> {
        self.take(slot)
    }

    fn wait_for_change(&mut self, _: u64) {
        // Each free of a recorded thread follows its allocation, on an
        // earlier line of the same thread, replayed in order.
        unreachable!("the only recorded thread waited for an allocation");
    }
}

impl Slots {
    fn new(count: usize) -> Slots {
        Slots {
            state: Mutex::new(SlotState {
                slots: vec![Slot::Pending; count],
                changes: 0,
                sleepers: 0,
            }),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set(&self, slot: usize, value: Slot) {
        let mut state = self.lock();
        state.slots[slot] = value;
        // Only compared for equality: a wrap would need 2^64 changes.
        state.changes = state.changes.wrapping_add(1);
        // A sleeper counted itself under this lock before it looked at
        // `changes`, so none can miss this change unwoken.
        let wake = state.sleepers > 0;
        drop(state);
        if wake {
            self.changed.notify_all();
        }
    }

    /// The pointer to free once its allocation was replayed (`None` when
    /// that failed); `Err` with the change count seen while it has not.
    fn try_take(&self, slot: usize) -> Result<Option<DevicePtr>, u64> {
        self.lock().take(slot)
    }

    /// Sleeps until a slot changed after the change count was `seen`.
    fn wait_for_change(&self, seen: u64) {
        let mut state = self.lock();
        state.sleepers += 1;
        while state.changes == seen {
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        state.sleepers -= 1;
    }
}

/// One operation to replay: an allocate or a free, its size and the
/// index of the allocation's slot. What the replay reads of the event is
/// copied here, so it goes through these (24 bytes each) without going
/// back to the 88-byte events.
struct Op {
    allocate: bool,
    nbytes: usize,
    slot: usize,
}

/// What the replay needs of the trace, read from its events in one pass.
struct Plan {
    /// Each recorded thread's allocates and frees, in order, with the
    /// slot each refers to.
    programs: Vec<Vec<Op>>,
    /// The number of slots (the allocations).
    slots: usize,
    /// Peak live bytes the trace records, as
    /// [`devmm::trace::Timeline::peak_bytes_of`] computes it.
    recorded_peak_bytes: usize,
    /// Allocations the trace records as failed.
    recorded_failures: usize,
}

/// The plan of `events`.
fn plan(events: &[TraceEvent]) -> Plan {
    let mut threads: Vec<(u64, Vec<Op>)> = Vec::new();
    let mut live = HashMap::with_hasher(BuildHasherDefault::<AddressHasher>::default());
    let mut slots = 0;
    let (mut total, mut recorded_peak_bytes, mut recorded_failures) = (0usize, 0usize, 0);
    for event in events {
        // Timeline::peak_bytes_of, in this pass rather than another.
        match event.action {
            Action::Allocate => total = total.saturating_add(event.nbytes),
            Action::Free => total = total.saturating_sub(event.nbytes),
            Action::AllocateFailure => recorded_failures += 1,
        }
        recorded_peak_bytes = recorded_peak_bytes.max(total);
        let slot = match event.action {
            Action::AllocateFailure => continue,
            Action::Allocate => {
                slots += 1;
                if event.ptr != 0 {
                    live.insert((event.device, event.ptr), slots - 1);
                }
                slots - 1
            }
            // Null frees (of zero-byte allocations) free nothing.
            Action::Free if event.ptr == 0 => continue,
            // `read_trace` checked that every free has its allocation.
            Action::Free => match live.remove(&(event.device, event.ptr)) {
                Some(slot) => slot,
                None => continue,
            },
        };
        let at = match threads.iter().position(|(t, _)| *t == event.thread) {
            Some(at) => at,
            None => {
                threads.push((event.thread, Vec::new()));
                threads.len() - 1
            }
        };
        threads[at].1.push(Op {
            allocate: event.action == Action::Allocate,
            nbytes: event.nbytes,
            slot,
        });
    }
    Plan {
        programs: threads.into_iter().map(|(_, ops)| ops).collect(),
        slots,
        recorded_peak_bytes,
        recorded_failures,
    }
}

/// Hashes the trace's (device, address) keys with one multiplication,
/// its 128-bit product folded: std's SipHash was a tenth of a replay's
/// instructions, and its resistance to chosen keys buys nothing against a
/// trace the user hands to a command on their own machine.
#[derive(Default)]
struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.write_u64(u64::from(byte));
        }
    }

    fn write_u64(&mut self, value: u64) {
        // hashbrown picks the bucket from the low bits and the tag from
        // the high ones. A product's low bits depend only on the key's low
        // bits, which allocators' alignment leaves alike (the benchmark's
        // addresses, 64 KiB apart, all fell in one bucket group: an insert
        // probed the whole table, 950 instructions); folding the high half
        // of the 128-bit product into the low one brings every key bit to
        // both ends.
        let product = u128::from(self.0.rotate_left(5) ^ value) * 0x9E37_79B9_7F4A_7C15;
        self.0 = (product as u64) ^ ((product >> 64) as u64);
    }

    fn write_usize(&mut self, value: usize) {
        self.write_u64(value as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// One replay thread's counts. Not every operation is timed: two clock
/// reads cost a third of a 64-byte `malloc`/`free` pair, so the first
/// [`TIME_ALL_FIRST`] of each kind are, then one in [`TIME_ONE_IN`]; the
/// means are over the timed ones.
#[derive(Default)]
struct Tally {
    allocations: usize,
    frees: usize,
    failures: usize,
    allocate_time: Duration,
    allocates_timed: usize,
    free_time: Duration,
    frees_timed: usize,
}

/// Every operation of a kind is timed up to this many per replay thread…
const TIME_ALL_FIRST: usize = 64;
/// … then one in this many.
const TIME_ONE_IN: usize = 16;

/// Whether the operation after `done` of its kind is timed.
fn timed(done: usize) -> bool {
    done < TIME_ALL_FIRST || done.is_multiple_of(TIME_ONE_IN)
}

/// Replays one operation; `Err` with the change count seen when it is a
/// free whose allocation another recorded thread has not replayed yet.
fn replay_op(
    op: &Op,
    mr: &dyn MemoryResource,
    stream: &Stream,
    slots: &mut impl SlotTable,
    tally: &mut Tally,
) -> Result<(), u64> {
    if op.allocate {
        let start = timed(tally.allocations + tally.failures).then(Instant::now);
        let result = mr.allocate(op.nbytes, stream);
        if let Some(start) = start {
            tally.allocate_time += start.elapsed();
            tally.allocates_timed += 1;
        }
        match result {
            Ok(ptr) => {
                tally.allocations += 1;
                slots.set(op.slot, Slot::Live(ptr));
            }
            Err(_) => {
                tally.failures += 1;
                slots.set(op.slot, Slot::Gone);
            }
        }
    } else if let Some(ptr) = slots.try_take(op.slot)? {
        let start = timed(tally.frees).then(Instant::now);
        // SAFETY: `ptr` came from `mr.allocate` with this size (the
        // trace's free matches its allocation's size) and its slot hands
        // it out once.
        let freed = unsafe { mr.deallocate(ptr, op.nbytes, stream) };
        if let Some(start) = start {
            tally.free_time += start.elapsed();
            tally.frees_timed += 1;
        }
        if freed.is_ok() {
            tally.frees += 1;
        }
    }
    Ok(())
}

/// Replays the recorded threads `programs` on this OS thread, interleaved:
/// each goes on until its next free waits for an allocation not yet
/// replayed, then the next one does; when all wait, the thread sleeps until
/// another thread replays something (see [`Slots`]).
fn replay_programs(
    programs: &[&[Op]],
    mr: &dyn MemoryResource,
    stream: &Stream,
    mut slots: impl SlotTable,
    bar: &indicatif::ProgressBar,
) -> Tally {
    let mut tally = Tally::default();
    let mut next = vec![0; programs.len()];
    // The bar moves in steps: an update per operation was a twentieth of
    // a replay.
    const STEP: u64 = 1024;
    let mut unshown = 0;
    loop {
        let (mut progressed, mut waiting) = (false, None);
        for (program, at) in programs.iter().zip(&mut next) {
            while let Some(op) = program.get(*at) {
                match replay_op(op, mr, stream, &mut slots, &mut tally) {
                    Ok(()) => {
                        *at += 1;
                        progressed = true;
                        unshown += 1;
                        if unshown == STEP {
                            bar.inc(STEP);
                            unshown = 0;
                        }
                    }
                    Err(seen) => {
                        // The first count seen is the oldest: any change
                        // since then may have let a program go on.
                        waiting.get_or_insert(seen);
                        break;
                    }
                }
            }
        }
        if waiting.is_none() || !progressed {
            bar.inc(unshown);
            unshown = 0;
        }
        match waiting {
            None => return tally,
            Some(seen) if !progressed => slots.wait_for_change(seen),
            Some(_) => {}
        }
    }
}

/// The most OS threads a replay runs on. A trace may record thousands of
/// threads (each a program to replay); they are dealt out among at most
/// this many OS threads, which interleave them, so what a trace recorded
/// does not decide how many threads (and stacks) the replay needs.
const MAX_REPLAY_THREADS: usize = 64;

/// Replays `programs` on at most [`MAX_REPLAY_THREADS`] OS threads, this one
/// included; a share whose thread cannot be started (a thread or address
/// space limit) is replayed here too. Returns each thread's tally.
fn replay_all(
    programs: &[Vec<Op>],
    mr: &dyn MemoryResource,
    stream: &Stream,
    slots: &mut Slots,
    bar: &indicatif::ProgressBar,
) -> Vec<Tally> {
    if programs.len() <= 1 {
        // One recorded thread: replayed here, nothing shared.
        let state = slots.state.get_mut().unwrap_or_else(|e| e.into_inner());
        let mine: Vec<&[Op]> = programs.iter().map(Vec::as_slice).collect();
        return vec![replay_programs(&mine, mr, stream, state, bar)];
    }
    let slots: &Slots = slots;
    let threads = programs.len().clamp(1, MAX_REPLAY_THREADS);
    let mut shares: Vec<Vec<&[Op]>> = vec![Vec::new(); threads];
    for (index, program) in programs.iter().enumerate() {
        shares[index % threads].push(program);
    }
    std::thread::scope(|scope| {
        let (here, others) = shares.split_first().expect("at least one share");
        let mut mine: Vec<&[Op]> = here.clone();
        let mut handles = Vec::new();
        for share in others {
            let started = std::thread::Builder::new()
                .name("devmm-replay".into())
                .spawn_scoped(scope, move || {
                    replay_programs(share, mr, stream, slots, bar)
                });
            match started {
                Ok(handle) => handles.push(handle),
                Err(_) => mine.extend_from_slice(share),
            }
        }
        let mut tallies = vec![replay_programs(&mine, mr, stream, slots, bar)];
        for handle in handles {
            tallies.push(
                handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            );
        }
        tallies
    })
}

fn mean_ns(total: Duration, count: usize) -> f64 {
    if count == 0 {
        0.0
    } else {
        total.as_nanos() as f64 / count as f64
    }
}

/// Runs `devmm replay`.
pub(crate) fn run(args: &ReplayArgs) -> Result<ExitCode, CliError> {
    let events = read_trace(&args.trace)?;
    let stats = Arc::new(StatisticsAdaptor::new(stack(args)?));
    let stream = devmm::runtime_for(args.device)?.default_stream(args.device)?;
    let Plan {
        programs,
        slots: slot_count,
        recorded_peak_bytes,
        recorded_failures,
    } = plan(&events);
    let mut slots = Slots::new(slot_count);
    let ops: usize = programs.iter().map(Vec::len).sum();
    let bar = progress::bar(ops as u64);
    bar.set_message("replaying");
    let start = Instant::now();
    let tallies = replay_all(&programs, &*stats, &stream, &mut slots, &bar);
    let wall = start.elapsed();
    bar.finish_and_clear();
    // What the trace never freed is freed now, so the stack ends clean.
    let mut unfreed = 0;
    let leftovers = slots
        .state
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .slots;
    // The sizes are the events': looked up only when something is left.
    if leftovers.iter().any(|slot| matches!(slot, Slot::Live(_))) {
        let sizes = events
            .iter()
            .filter(|e| e.action == Action::Allocate)
            .map(|e| e.nbytes);
        for (slot, nbytes) in leftovers.into_iter().zip(sizes) {
            if let Slot::Live(ptr) = slot {
                // Null zero-byte allocations hold nothing and are not counted.
                unfreed += usize::from(!ptr.is_null());
                // SAFETY: allocated on replay with `nbytes` and never freed.
                let _ = unsafe { stats.deallocate(ptr, nbytes, &stream) };
            }
        }
    }
    let total = tallies.iter().fold(Tally::default(), |mut sum, t| {
        sum.allocations += t.allocations;
        sum.frees += t.frees;
        sum.failures += t.failures;
        sum.allocate_time += t.allocate_time;
        sum.allocates_timed += t.allocates_timed;
        sum.free_time += t.free_time;
        sum.frees_timed += t.frees_timed;
        sum
    });
    let report = ReplayReport {
        trace: args.trace.display().to_string(),
        stack: devmm::resource_chain(&*stats),
        events: events.len(),
        threads: programs.len(),
        replay_threads: programs.len().clamp(1, MAX_REPLAY_THREADS),
        recorded_peak_bytes,
        peak_bytes: stats.peak_bytes(),
        failures: total.failures,
        recorded_failures,
        unfreed,
        allocations: total.allocations,
        frees: total.frees,
        allocate_mean_ns: mean_ns(total.allocate_time, total.allocates_timed),
        free_mean_ns: mean_ns(total.free_time, total.frees_timed),
        wall_ns: wall.as_nanos(),
    };
    report::emit(&report, args.json)?;
    Ok(if report.failures == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    /// Addresses that share their low bits (an allocator's alignment, 64
    /// KiB apart here) still spread over the plan map's buckets, which
    /// hashbrown picks from a hash's low bits.
    #[test]
    fn aligned_addresses_spread_over_buckets() {
        let hasher = BuildHasherDefault::<AddressHasher>::default();
        let buckets: std::collections::HashSet<u64> = (1..=1024usize)
            .map(|n| hasher.hash_one((None::<Device>, 0x7f8a_4000_0000 + n * 0x10_000)) & 1023)
            .collect();
        assert!(buckets.len() > 512, "{} buckets of 1024", buckets.len());
    }

    /// The plan's recorded peak and failures are the trace's, counted in
    /// its one pass.
    #[test]
    fn the_plan_counts_what_the_trace_records() {
        let csv = "Thread,Time,Action,Pointer,Size,Stream\n\
                   1,10:00:00.000001,allocate,0x1000,64,0\n\
                   2,10:00:00.000002,allocate failure,(nil),4096,0\n\
                   1,10:00:00.000003,allocate,(nil),0,0\n\
                   2,10:00:00.000004,allocate,0x2000,32,0\n\
                   1,10:00:00.000005,free,0x1000,64,0\n\
                   2,10:00:00.000006,allocate,0x1000,128,0\n\
                   1,10:00:00.000007,free,(nil),0,0\n\
                   2,10:00:00.000008,free,0x2000,32,0\n";
        let events = devmm::trace::parse_trace(csv, "t.csv").unwrap();
        let plan = plan(&events);
        assert_eq!(
            plan.recorded_peak_bytes,
            devmm::trace::Timeline::peak_bytes_of(&events)
        );
        assert_eq!((plan.recorded_peak_bytes, plan.recorded_failures), (160, 1));
        let ops: Vec<Vec<_>> = plan
            .programs
            .iter()
            .map(|ops| ops.iter().map(|o| (o.allocate, o.nbytes, o.slot)).collect())
            .collect();
        assert_eq!(
            ops,
            [
                vec![(true, 64, 0), (true, 0, 1), (false, 64, 0)],
                vec![(true, 32, 2), (true, 128, 3), (false, 32, 2)],
            ]
        );
        assert_eq!(plan.slots, 4);
    }
}
