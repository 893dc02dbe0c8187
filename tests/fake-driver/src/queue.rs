//! Stream work queues, as strict as hardware: each stream runs its work on its own worker
//! thread, in submission order, each item after a configurable delay (`fake_set_stream_delay`),
//! so work that is not ordered (a missing wait, a free racing a consumer's copy) runs in the
//! wrong order in a test and corrupts its data instead of passing by luck.
//!
//! A test that must see work *not yet* run holds it instead of racing a delay: while a thread
//! holds ([`set_holding`], `fake_hold_work`), the work it queues waits, before it runs, for the
//! next [`release`] (`fake_release_work`); the queue behind a held job waits with it.
//!
//! A [`Marker`] is a point in one queue (the work submitted so far); events capture one, waits
//! submit a job that blocks on one, synchronization blocks the caller on one. Markers only ever
//! name work submitted earlier, so waits cannot form a cycle.

use std::collections::{HashSet, VecDeque};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, LazyLock, Mutex, MutexGuard, PoisonError};
use std::thread::ThreadId;
use std::time::Duration;

use crate::platform::Fault;

/// Microseconds each queued item waits before it runs; [`UNSET`] until first read, when
/// `FAKE_DRIVER_STREAM_DELAY_US` (default 0) gives it.
static DELAY_MICROS: AtomicU64 = AtomicU64::new(UNSET);
const UNSET: u64 = u64::MAX;

/// Sets the delay before each queued item runs (`fake_set_stream_delay`).
pub(crate) fn set_delay(micros: u64) {
    DELAY_MICROS.store(micros.min(UNSET - 1), Ordering::Relaxed);
}

fn delay() -> u64 {
    let micros = DELAY_MICROS.load(Ordering::Relaxed);
    if micros != UNSET {
        return micros;
    }
    let from_env = std::env::var("FAKE_DRIVER_STREAM_DELAY_US")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    set_delay(from_env);
    from_env
}

/// The threads whose queued work is held (`fake_hold_work`).
static HOLDING: LazyLock<Mutex<HashSet<ThreadId>>> = LazyLock::new(Mutex::default);

/// What held work waits for: opened by [`release`], which puts a closed one in its place.
static GATE: LazyLock<Mutex<Arc<Gate>>> = LazyLock::new(Mutex::default);

#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
}

impl Gate {
    fn wait(&self) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        while !*open {
            open = self
                .opened
                .wait(open)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// Starts (`on`) or stops holding the work the calling thread queues: from now on, until it
/// stops, each job it queues waits for the next [`release`] before it runs.
pub(crate) fn set_holding(on: bool) {
    let mut holding = HOLDING.lock().unwrap_or_else(PoisonError::into_inner);
    let me = std::thread::current().id();
    if on {
        holding.insert(me);
    } else {
        holding.remove(&me);
    }
}

/// Lets every job held so far run; work held after this waits for the next release.
pub(crate) fn release() {
    let opened = std::mem::take(&mut *GATE.lock().unwrap_or_else(PoisonError::into_inner));
    *opened.open.lock().unwrap_or_else(PoisonError::into_inner) = true;
    opened.opened.notify_all();
}

/// Stops every thread's holding and releases what it held (`fake_reset`).
pub(crate) fn release_all() {
    HOLDING
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
    release();
}

/// `job`, made to wait for the next release first when the calling thread holds its work.
fn held(job: Job) -> Job {
    let me = std::thread::current().id();
    if !HOLDING
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .contains(&me)
    {
        return job;
    }
    let gate = Arc::clone(&GATE.lock().unwrap_or_else(PoisonError::into_inner));
    Box::new(move || {
        gate.wait();
        job();
    })
}

/// One unit of stream work.
pub(crate) type Job = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct Progress {
    submitted: u64,
    completed: u64,
    jobs: VecDeque<Job>,
    /// A worker thread is draining `jobs`; it exits when they run out.
    running: bool,
}

#[derive(Default)]
struct Inner {
    progress: Mutex<Progress>,
    changed: Condvar,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Progress> {
        self.progress.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A stream's queue; clones share it.
#[derive(Clone, Default)]
pub(crate) struct Queue {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let progress = self.inner.lock();
        write!(f, "Queue({}/{})", progress.completed, progress.submitted)
    }
}

/// The work a queue had been given when the marker was taken.
#[derive(Clone)]
pub(crate) struct Marker {
    inner: Arc<Inner>,
    seq: u64,
}

impl std::fmt::Debug for Marker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Marker({})", self.seq)
    }
}

impl Queue {
    /// Queues `job` after everything submitted so far (held, if the calling thread holds);
    /// [`Fault::OutOfMemory`] when no worker thread can be started for it (the job is dropped
    /// unrun).
    pub(crate) fn submit(&self, job: Job) -> Result<(), Fault> {
        let job = held(job);
        let mut progress = self.inner.lock();
        progress.submitted += 1;
        progress.jobs.push_back(job);
        if progress.running {
            return Ok(());
        }
        progress.running = true;
        drop(progress);
        if spawn_worker(Arc::clone(&self.inner)).is_ok() {
            return Ok(());
        }
        // Draining here instead would run jobs that take the driver's State lock on the thread
        // that holds it. Submits are serialised by that lock, so the job just queued is the
        // last one and no worker runs: take it back and report the host out of resources.
        let mut progress = self.inner.lock();
        progress.jobs.pop_back();
        progress.submitted -= 1;
        progress.running = false;
        Err(Fault::OutOfMemory)
    }

    /// The work submitted so far.
    pub(crate) fn marker(&self) -> Marker {
        Marker {
            inner: Arc::clone(&self.inner),
            seq: self.inner.lock().submitted,
        }
    }
}

impl Marker {
    /// Whether the marked work has run.
    pub(crate) fn is_done(&self) -> bool {
        self.inner.lock().completed >= self.seq
    }

    /// Blocks until the marked work has run.
    pub(crate) fn wait(&self) {
        let mut progress = self.inner.lock();
        while progress.completed < self.seq {
            progress = self
                .inner
                .changed
                .wait(progress)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

#[cfg(test)]
thread_local! {
    /// Set by a test: the next worker threads of this thread fail to start.
    static FAIL_SPAWN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Starts a worker thread draining `inner`.
fn spawn_worker(inner: Arc<Inner>) -> std::io::Result<()> {
    #[cfg(test)]
    if FAIL_SPAWN.with(std::cell::Cell::get) {
        return Err(std::io::Error::other(
            "thread spawning disabled by the test",
        ));
    }
    std::thread::Builder::new()
        .name("fake-stream".into())
        .spawn(move || drain(&inner))
        .map(drop)
}

fn drain(inner: &Inner) {
    loop {
        let job = {
            let mut progress = inner.lock();
            match progress.jobs.pop_front() {
                Some(job) => job,
                None => {
                    progress.running = false;
                    return;
                }
            }
        };
        let delay = delay();
        if delay > 0 {
            std::thread::sleep(Duration::from_micros(delay));
        }
        // A failing job must not stop the queue: its successors still run, in order.
        let _ = panic::catch_unwind(AssertUnwindSafe(job));
        inner.lock().completed += 1;
        inner.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex as StdMutex;

    #[test]
    fn no_worker_thread_is_a_fault_not_inline_work() {
        let queue = Queue::default();
        let ran = Arc::new(StdMutex::new(false));
        let flag = Arc::clone(&ran);
        FAIL_SPAWN.with(|f| f.set(true));
        let outcome = queue.submit(Box::new(move || *flag.lock().unwrap() = true));
        FAIL_SPAWN.with(|f| f.set(false));
        // Run inline, the job would take the driver's State lock its caller holds.
        assert!(
            !*ran.lock().unwrap(),
            "the job did not run on the caller's thread"
        );
        assert_eq!(outcome, Err(Fault::OutOfMemory));
        assert!(queue.marker().is_done(), "the refused job is not pending");
        assert_eq!(queue.submit(Box::new(|| {})), Ok(()));
        queue.marker().wait();
    }

    #[test]
    fn work_runs_in_order_and_markers_wait_for_it() {
        set_delay(200);
        let queue = Queue::default();
        let seen = Arc::new(StdMutex::new(Vec::new()));
        for i in 0..5 {
            let seen = Arc::clone(&seen);
            queue
                .submit(Box::new(move || seen.lock().unwrap().push(i)))
                .unwrap();
        }
        let marker = queue.marker();
        marker.wait();
        assert!(marker.is_done());
        assert_eq!(*seen.lock().unwrap(), [0, 1, 2, 3, 4]);
        set_delay(0);
    }

    #[test]
    fn held_work_runs_only_once_released_and_the_rest_of_its_queue_waits_behind_it() {
        let (held_queue, free_queue) = (Queue::default(), Queue::default());
        let seen = Arc::new(StdMutex::new(Vec::new()));
        let push = |name: &'static str| {
            let seen = Arc::clone(&seen);
            Box::new(move || seen.lock().unwrap().push(name)) as Job
        };
        set_holding(true);
        held_queue.submit(push("held")).unwrap();
        set_holding(false);
        held_queue.submit(push("behind")).unwrap();
        free_queue.submit(push("free")).unwrap();
        free_queue.marker().wait();
        assert!(!held_queue.marker().is_done());
        assert_eq!(*seen.lock().unwrap(), ["free"]);
        release();
        held_queue.marker().wait();
        assert_eq!(*seen.lock().unwrap(), ["free", "held", "behind"]);
    }

    #[test]
    fn a_wait_job_orders_one_queue_after_another() {
        let (a, b) = (Queue::default(), Queue::default());
        let seen = Arc::new(StdMutex::new(Vec::new()));
        let gate = Arc::new((StdMutex::new(false), Condvar::new()));
        {
            let gate = Arc::clone(&gate);
            let seen = Arc::clone(&seen);
            a.submit(Box::new(move || {
                let (open, cv) = &*gate;
                let mut open = open.lock().unwrap();
                while !*open {
                    open = cv.wait(open).unwrap();
                }
                seen.lock().unwrap().push("a");
            }))
            .unwrap();
        }
        let after_a = a.marker();
        b.submit(Box::new(move || after_a.wait())).unwrap();
        let seen_b = Arc::clone(&seen);
        b.submit(Box::new(move || seen_b.lock().unwrap().push("b")))
            .unwrap();
        assert!(!b.marker().is_done());
        *gate.0.lock().unwrap() = true;
        gate.1.notify_all();
        b.marker().wait();
        assert_eq!(*seen.lock().unwrap(), ["a", "b"]);
    }
}
