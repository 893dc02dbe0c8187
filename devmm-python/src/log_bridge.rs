//! Forwards devmm's `tracing` events to Python's `logging`, so the core
//! `LoggingAdaptor`'s structured events become records on the `devmm.mr`
//! logger (target `devmm::mr` → logger `devmm.mr`), with each field as a
//! record attribute. A `LoggingAdaptor` given a Python logger names it
//! by a key; the bridge holds the logger object under that key while the
//! adaptor lives.

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, Weak};

use devmm::{LogRecord, LogValue};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyDict;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// The subscriber: only devmm's own targets are enabled, so other crates'
/// events cost nothing.
struct PythonLogging;

fn python_level(level: &Level) -> u32 {
    match *level {
        Level::ERROR => 40,
        Level::WARN => 30,
        Level::INFO => 20,
        Level::DEBUG => 10,
        Level::TRACE => 5,
    }
}

/// The Python loggers `LoggingAdaptor`s were given, by the key their
/// events name, each with the adaptor it lives as long as.
type Loggers = HashMap<String, (Weak<dyn Any + Send + Sync>, Py<PyAny>)>;

static LOGGERS: Mutex<Option<Loggers>> = Mutex::new(None);

fn loggers() -> MutexGuard<'static, Option<Loggers>> {
    // A panic while holding the lock leaves a consistent map.
    LOGGERS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A key no other adaptor's logger has.
pub(crate) fn logger_key() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("python-logger-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Holds `logger` under `key` while `owner` lives; loggers of adaptors
/// gone since are let go here (called with the GIL held).
pub(crate) fn register_logger(key: String, owner: Weak<dyn Any + Send + Sync>, logger: Py<PyAny>) {
    let stale: Vec<_> = {
        let mut loggers = loggers();
        let map = loggers.get_or_insert_with(HashMap::new);
        let stale = map
            .extract_if(|_, (owner, _)| owner.strong_count() == 0)
            .collect();
        map.insert(key, (owner, logger));
        stale
    };
    // Let go outside the lock: releasing a logger can run Python code,
    // which may make another `LoggingAdaptor`.
    drop(stale);
}

/// The logger registered under `key`, if its adaptor still lives.
fn registered_logger<'py>(py: Python<'py>, key: &str) -> Option<Bound<'py, PyAny>> {
    let loggers = loggers();
    let (owner, logger) = loggers.as_ref()?.get(key)?;
    (owner.strong_count() > 0).then(|| logger.bind(py).clone())
}

/// A record and its target, as the subscriber saw it.
type Made = (&'static str, Level, LogRecord);

/// Emits `records` in order, with the GIL held where no framework lock is; a
/// record kept while a framework's lock was held (`deferred`) says so in
/// its `deferred` attribute, as its time is the time it was emitted.
fn emit_all(py: Python<'_>, records: impl IntoIterator<Item = (Made, bool)>) {
    if finalizing(py) {
        return;
    }
    for ((target, level, record), deferred) in records {
        if let Err(err) = emit(py, target, &level, &record, deferred) {
            // A broken handler must not turn an allocation into a failure;
            // an interrupt (Ctrl-C in a handler) must still reach the
            // program, so the calling binding raises it.
            if let Some(err) = crate::error::defer_interrupt(py, err) {
                err.write_unraisable(py, None);
            }
        }
    }
}

fn emit(
    py: Python<'_>,
    target: &str,
    level: &Level,
    record: &LogRecord,
    deferred: bool,
) -> PyResult<()> {
    let name = record.logger_name(target);
    let logger = match registered_logger(py, &name) {
        Some(logger) => logger,
        None => crate::gil::call(&py.import("logging")?.getattr("getLogger")?, (name,), None)?,
    };
    let level = python_level(level);
    if !crate::gil::call(&logger.getattr("isEnabledFor")?, (level,), None)?.is_truthy()? {
        return Ok(());
    }
    let extra = PyDict::new(py);
    for (name, value) in &record.fields {
        match value {
            LogValue::Int(n) => extra.set_item(name, n)?,
            LogValue::Text(t) => extra.set_item(name, t)?,
        }
    }
    if deferred {
        extra.set_item("deferred", true)?;
    }
    let kwargs = PyDict::new(py);
    kwargs.set_item("extra", extra)?;
    crate::gil::call(
        &logger.getattr("log")?,
        (level, record.summary()),
        Some(&kwargs),
    )?;
    Ok(())
}

impl Subscriber for PythonLogging {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target().starts_with("devmm::")
    }

    fn new_span(&self, _span: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }

    fn record(&self, _span: &Id, _values: &Record<'_>) {}

    fn record_follows_from(&self, _span: &Id, _follows: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let metadata = event.metadata();
        let record = (metadata.target(), *metadata.level(), LogRecord::of(event));
        if !crate::gil::may_wait_for_gil() {
            Deferred::keep(record);
            return;
        }
        crate::gil::attach(|py| {
            emit_all(py, Deferred::marked().chain([(record, false)]));
        });
    }

    fn enter(&self, _span: &Id) {}

    fn exit(&self, _span: &Id) {}
}

/// Records made where the thread must not wait for the GIL
/// ([`crate::gil::under_framework_lock`]: inside PyTorch's allocator lock),
/// in order; a thread of devmm's own emits them soon after
/// ([`schedule_flush`]), or the next record made where the thread may wait
/// emits them first, whichever comes first (a record made meanwhile on
/// another thread may come out between them: handlers hand the GIL over
/// around I/O). At
/// most [`Deferred::LIMIT`] wait: past it a record below `WARN` makes room
/// by dropping the oldest such record, or is dropped itself; a warning or
/// an error is kept over them, and only a dropped one of those is counted
/// in the warning that says so.
struct Deferred {
    records: Vec<Made>,
    dropped: u64,
}

static DEFERRED: Mutex<Deferred> = Mutex::new(Deferred {
    records: Vec::new(),
    dropped: 0,
});

impl Deferred {
    const LIMIT: usize = 1024;

    fn lock() -> MutexGuard<'static, Deferred> {
        // Each update is one push or one swap: never left half-done.
        DEFERRED.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn keep(record: Made) {
        Self::push(record);
        schedule_flush();
    }

    fn push(record: Made) {
        // tracing orders levels by verbosity: `> WARN` is INFO and below.
        let minor = |level: &Level| *level > Level::WARN;
        let mut deferred = Self::lock();
        if deferred.records.len() >= Self::LIMIT {
            match deferred.records.iter().position(|(_, l, _)| minor(l)) {
                Some(oldest_minor) => {
                    deferred.records.remove(oldest_minor);
                }
                None => {
                    if !minor(&record.1) {
                        deferred.dropped += 1;
                    }
                    return;
                }
            }
        }
        deferred.records.push(record);
    }

    /// [`take`](Self::take)'s records, each marked deferred.
    fn marked() -> impl Iterator<Item = (Made, bool)> {
        Self::take().into_iter().map(|made| (made, true))
    }

    /// The records kept so far, oldest first, then the warning for any
    /// dropped.
    fn take() -> Vec<Made> {
        let mut deferred = Self::lock();
        let mut records = std::mem::take(&mut deferred.records);
        let dropped = std::mem::take(&mut deferred.dropped);
        if dropped > 0 {
            let message = format!(
                "{dropped} devmm log records made inside PyTorch's allocator lock were dropped \
                 (at most {} wait for the GIL)",
                Self::LIMIT
            );
            let warning = LogRecord {
                message: Some(message),
                ..LogRecord::default()
            };
            records.push(("devmm::torch", Level::WARN, warning));
        }
        records
    }
}

/// Whether records wait for the flushing thread, and its wake-up.
static PENDING: Mutex<bool> = Mutex::new(false);
static WAKE: Condvar = Condvar::new();

/// The process that started the flushing thread (0: none yet). A child
/// forked from it has no such thread, and its copy of `PENDING` may have
/// been locked by that thread at the fork: a child leaves both alone.
static FLUSHER_PID: AtomicU32 = AtomicU32::new(0);

/// Wakes the thread that emits the deferred records ([`flush_forever`]),
/// starting it the first time. Waking it takes only a plain mutex, never
/// the GIL, so it may be done inside PyTorch's lock; the thread then
/// takes the GIL holding no lock of PyTorch's, like any other thread, so
/// a handler's own locks are taken in their usual order (code run between
/// the main thread's bytecodes could deadlock on a lock the interrupted
/// code holds, as a signal handler can). In a forked child, and if the
/// thread cannot start, records wait for the next record made where the
/// GIL may be taken.
fn schedule_flush() {
    let pid = std::process::id();
    match FLUSHER_PID.compare_exchange(0, pid, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => {
            let spawned = std::thread::Builder::new()
                .name("devmm-log-flush".into())
                .spawn(flush_forever);
            if let Err(error) = spawned {
                eprintln!(
                    "devmm: no thread to emit log records kept inside PyTorch's lock: {error}"
                );
                return;
            }
        }
        Err(started) if started != pid => return,
        Err(_) => {}
    }
    *PENDING.lock().unwrap_or_else(|e| e.into_inner()) = true;
    WAKE.notify_one();
}

/// The flushing thread: emits the records kept so far each time it is
/// woken, until the interpreter is gone. It holds no lock while it waits
/// for the GIL or runs a handler.
fn flush_forever() {
    loop {
        {
            let mut pending = PENDING.lock().unwrap_or_else(|e| e.into_inner());
            while !*pending {
                pending = WAKE.wait(pending).unwrap_or_else(|e| e.into_inner());
            }
            *pending = false;
        }
        let emitted = crate::gil::attach(|py| {
            emit_all(py, Deferred::marked());
            // No binding call on this thread will raise an interrupt a
            // handler kept for it (`defer_interrupt`): reported here.
            if let Some(interrupt) = crate::error::take_deferred_interrupt() {
                interrupt.write_unraisable(py, None);
            }
        });
        if emitted.is_none() {
            return;
        }
    }
}

/// `sys.is_finalizing`, kept from the start: while the interpreter
/// finalises, the memory it frees (a tensor of a `LoggingAdaptor` still
/// alive) would log into a half-torn-down `logging`, which prints import
/// errors instead of records, so events are dropped then.
static IS_FINALIZING: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

fn finalizing(py: Python<'_>) -> bool {
    IS_FINALIZING
        .get(py)
        .is_none_or(|f| f.call0(py).and_then(|f| f.is_truthy(py)).unwrap_or(true))
}

/// Routes devmm's events to Python logging for the rest of the process
/// (until the interpreter finalises). If the embedding program already set
/// a global subscriber, it keeps it.
pub(crate) fn install(py: Python<'_>) -> PyResult<()> {
    let is_finalizing = py.import("sys")?.getattr("is_finalizing")?.unbind();
    let _ = IS_FINALIZING.set(py, is_finalizing);
    let _ = tracing::subscriber::set_global_default(PythonLogging);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{Deferred, Level, LogRecord};

    fn record(level: Level, n: usize) -> (&'static str, Level, LogRecord) {
        let message = Some(n.to_string());
        (
            "devmm::test",
            level,
            LogRecord {
                message,
                ..LogRecord::default()
            },
        )
    }

    fn messages(records: &[(&'static str, Level, LogRecord)]) -> Vec<String> {
        records
            .iter()
            .filter_map(|(_, _, r)| r.message.clone())
            .collect()
    }

    #[test]
    fn a_full_queue_keeps_warnings_over_minor_records_and_counts_only_theirs() {
        let limit = Deferred::LIMIT;
        Deferred::take();
        for n in 0..limit {
            Deferred::push(record(Level::DEBUG, n));
        }
        // Room is made from the oldest minor records, for anything.
        Deferred::push(record(Level::ERROR, limit));
        Deferred::push(record(Level::DEBUG, limit + 1));
        let kept = Deferred::take();
        assert_eq!(
            kept.len(),
            limit,
            "no warning: nothing that counts was dropped"
        );
        let texts = messages(&kept);
        assert_eq!(texts[0], "2");
        assert_eq!(
            texts[limit - 2..],
            [limit.to_string(), (limit + 1).to_string()]
        );
        // Full of errors: a minor record goes unnoticed, an error is counted.
        for n in 0..limit {
            Deferred::push(record(Level::ERROR, n));
        }
        Deferred::push(record(Level::DEBUG, limit));
        Deferred::push(record(Level::WARN, limit + 1));
        let kept = Deferred::take();
        assert_eq!(kept.len(), limit + 1);
        let (_, level, warning) = &kept[limit];
        assert_eq!(*level, Level::WARN);
        let text = warning.message.clone().unwrap();
        assert!(text.starts_with("1 devmm log records"), "{text}");
        assert!(Deferred::take().is_empty());
    }
}
