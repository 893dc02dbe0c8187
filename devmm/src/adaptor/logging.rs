use std::fmt;

use tracing::field::{Field, Visit};

use crate::error::Result;
use crate::ptr::DevicePtr;
use crate::resource::{MemoryInfo, MemoryResource};
use crate::stream::Stream;

/// The `tracing` target of [`LoggingAdaptor`] events.
pub const LOG_TARGET: &str = "devmm::mr";

/// Emits one structured `tracing` event per call, on target `devmm::mr`,
/// with the fields `op`, `ptr`, `nbytes`, `stream`, `device` (and `error`
/// when the call failed, and `logger` when [`with_logger`](Self::with_logger)
/// names where the records belong).
///
/// ```
/// use devmm::{LoggingAdaptor, MallocMemoryResource, MemoryResource, Stream};
/// let mr = LoggingAdaptor::new(MallocMemoryResource::new());
/// let s = Stream::cpu();
/// let p = mr.allocate(16, &s)?; // event: op="allocate" nbytes=16 ...
/// unsafe { mr.deallocate(p, 16, &s)? };
/// # Ok::<(), devmm::Error>(())
/// ```
#[derive(Debug)]
pub struct LoggingAdaptor<U> {
    upstream: super::upstream::Upstream<U>,
    logger: Option<Box<str>>,
    probes: super::UpstreamProbes,
}

impl<U: MemoryResource> LoggingAdaptor<U> {
    /// Wraps `upstream`.
    pub fn new(upstream: U) -> Self {
        LoggingAdaptor {
            upstream: super::upstream::Upstream::new(upstream),
            logger: None,
            probes: super::UpstreamProbes::new(),
        }
    }

    /// Wraps `upstream`, naming in each event (field `logger`) the logger
    /// its records go to, for a subscriber that routes them (the Python
    /// package writes them to that `logging` logger).
    ///
    /// ```
    /// use devmm::{LoggingAdaptor, MallocMemoryResource};
    /// let mr = LoggingAdaptor::with_logger(MallocMemoryResource::new(), "myapp.memory");
    /// assert_eq!(mr.logger(), Some("myapp.memory"));
    /// ```
    pub fn with_logger(upstream: U, logger: impl Into<Box<str>>) -> Self {
        LoggingAdaptor {
            upstream: super::upstream::Upstream::new(upstream),
            logger: Some(logger.into()),
            probes: super::UpstreamProbes::new(),
        }
    }

    /// The logger named in the events, if any.
    pub fn logger(&self) -> Option<&str> {
        self.logger.as_deref()
    }

    /// The wrapped resource.
    pub fn get_upstream(&self) -> &U {
        &self.upstream
    }
}

impl<U: MemoryResource> MemoryResource for LoggingAdaptor<U> {
    fn allocate(&self, nbytes: usize, stream: &Stream) -> Result<DevicePtr> {
        let result = self
            .upstream
            .allocate(nbytes, stream)
            .map_err(|e| e.through("LoggingAdaptor"));
        match &result {
            Ok(ptr) => tracing::info!(
                target: LOG_TARGET,
                op = "allocate",
                device = %self.upstream.device(),
                nbytes,
                ptr = ptr.addr(),
                stream = stream.handle(),
                logger = self.logger(),
            ),
            Err(error) => tracing::warn!(
                target: LOG_TARGET,
                op = "allocate",
                device = %self.upstream.device(),
                nbytes,
                stream = stream.handle(),
                logger = self.logger(),
                %error,
            ),
        }
        result
    }

    unsafe fn deallocate(&self, ptr: DevicePtr, nbytes: usize, stream: &Stream) -> Result<()> {
        // SAFETY: forwarded verbatim; the caller upholds the contract.
        let result = unsafe { self.upstream.deallocate(ptr, nbytes, stream) };
        match &result {
            Ok(()) => tracing::info!(
                target: LOG_TARGET,
                op = "deallocate",
                device = %self.upstream.device(),
                nbytes,
                ptr = ptr.addr(),
                stream = stream.handle(),
                logger = self.logger(),
            ),
            Err(error) => tracing::warn!(
                target: LOG_TARGET,
                op = "deallocate",
                device = %self.upstream.device(),
                nbytes,
                ptr = ptr.addr(),
                stream = stream.handle(),
                logger = self.logger(),
                %error,
            ),
        }
        result
    }

    fn available_memory(&self) -> Result<MemoryInfo> {
        self.upstream.available_memory()
    }

    forward_probes!(upstream: U, probes);
}

/// One [`LoggingAdaptor`] event read back from its fields, for a
/// subscriber that forwards the events to another logging system (the
/// Python package's bridge to `logging`): the message, the logger the
/// event names, and every other field as an integer or text.
///
/// ```
/// use devmm::{LogRecord, LogValue};
/// let record = LogRecord {
///     fields: vec![
///         ("op", LogValue::Text("allocate".into())),
///         ("ptr", LogValue::Int(4096)),
///         ("nbytes", LogValue::Int(64)),
///     ],
///     ..LogRecord::default()
/// };
/// assert_eq!(record.summary(), "allocate ptr=0x1000 nbytes=64");
/// assert_eq!(record.logger_name("devmm::mr"), "devmm.mr");
/// ```
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LogRecord {
    /// The event's message, if it has one.
    pub message: Option<String>,
    /// The logger the event names ([`LoggingAdaptor::with_logger`]'s).
    pub logger: Option<String>,
    /// The other fields, in the order the event recorded them.
    pub fields: Vec<(&'static str, LogValue)>,
}

/// The value of one field of a [`LogRecord`]: what a `tracing` event
/// recorded, as an integer or as text.
///
/// ```
/// use devmm::{LogRecord, LogValue};
/// let record = LogRecord {
///     fields: vec![("nbytes", LogValue::Int(64)), ("device", LogValue::Text("cpu:0".into()))],
///     ..LogRecord::default()
/// };
/// assert_eq!(record.summary(), "nbytes=64 device=cpu:0");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogValue {
    /// An integer field (`ptr`, `nbytes`, `stream`).
    Int(u64),
    /// Any other field, as text (`device`, `error`).
    Text(String),
}

impl LogRecord {
    /// The record of `event`, as a `tracing` layer receives it (the
    /// binding's bridge to Python's `logging` reads each event so).
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use devmm::LogRecord;
    /// use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
    ///
    /// struct Keep(Arc<Mutex<Vec<LogRecord>>>);
    /// impl<S: tracing::Subscriber> Layer<S> for Keep {
    ///     fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
    ///         self.0.lock().unwrap().push(LogRecord::of(event));
    ///     }
    /// }
    /// let kept = Arc::new(Mutex::new(Vec::new()));
    /// let subscriber = tracing_subscriber::registry().with(Keep(Arc::clone(&kept)));
    /// tracing::subscriber::with_default(subscriber, || {
    ///     tracing::info!(op = "allocate", nbytes = 64u64, "done");
    /// });
    /// assert_eq!(kept.lock().unwrap()[0].summary(), "allocate done nbytes=64");
    /// ```
    pub fn of(event: &tracing::Event<'_>) -> LogRecord {
        let mut record = LogRecord::default();
        event.record(&mut record);
        record
    }

    /// The dotted name of the logger the record belongs to: the one the
    /// event names, else the event's `target` with `::` as `.`
    /// (`devmm::mr` → `devmm.mr`).
    pub fn logger_name(&self, target: &str) -> String {
        match &self.logger {
            Some(logger) => logger.clone(),
            None => target.replace("::", "."),
        }
    }

    /// The record as one line, its parts one space apart: the `op`, the
    /// message, then each other field as `name=value`, an address in hex
    /// (`allocate device=cpu:0 nbytes=64 ptr=0x1000 stream=0`). A part
    /// the record lacks leaves no space behind.
    ///
    /// ```
    /// use devmm::{LogRecord, LogValue};
    /// let record = LogRecord {
    ///     message: Some("release failed".into()),
    ///     fields: vec![("op", LogValue::Text("free".into())), ("ptr", LogValue::Int(255))],
    ///     ..LogRecord::default()
    /// };
    /// assert_eq!(record.summary(), "free release failed ptr=0xff");
    /// let bare = LogRecord { message: Some("hello".into()), ..LogRecord::default() };
    /// assert_eq!(bare.summary(), "hello");
    /// ```
    pub fn summary(&self) -> String {
        let op = self
            .fields
            .iter()
            .find_map(|(name, value)| match (*name, value) {
                ("op", LogValue::Text(op)) => Some(op.clone()),
                _ => None,
            });
        let fields = self
            .fields
            .iter()
            .filter_map(|(name, value)| match (*name, value) {
                ("op", _) => None,
                ("ptr", LogValue::Int(addr)) => Some(format!("ptr={addr:#x}")),
                (_, LogValue::Int(n)) => Some(format!("{name}={n}")),
                (_, LogValue::Text(t)) => Some(format!("{name}={t}")),
            });
        let parts = op.into_iter().chain(self.message.clone()).chain(fields);
        parts
            .filter(|part| !part.is_empty())
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn record_text(&mut self, field: &Field, text: String) {
        match field.name() {
            "message" => self.message = Some(text),
            "logger" => self.logger = Some(text),
            name => self.fields.push((name, LogValue::Text(text))),
        }
    }
}

impl Visit for LogRecord {
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.fields.push((field.name(), LogValue::Int(value)));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.record_text(field, value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.record_text(field, format!("{value:?}"));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.record_text(field, value.to_string());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Metadata, Subscriber};

    use super::*;
    use crate::{MallocMemoryResource, MemoryResource};

    /// Keeps the record of every event.
    #[derive(Default)]
    struct Records(Mutex<Vec<(String, LogRecord)>>);

    impl Subscriber for &'static Records {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &Event<'_>) {
            let target = event.metadata().target().to_owned();
            self.0.lock().unwrap().push((target, LogRecord::of(event)));
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    #[test]
    fn an_adaptors_events_read_back_as_one_line_each() {
        let records: &'static Records = Box::leak(Box::default());
        let mr = LoggingAdaptor::with_logger(MallocMemoryResource::new(), "app.memory");
        let stream = Stream::cpu();
        // The callsites' interest is cached process-wide by the first thread
        // to reach them (a parallel test with no subscriber caches "never"):
        // reach them first, then have tracing ask this subscriber again.
        let warm = mr.allocate(64, &stream).unwrap();
        // SAFETY: allocated just above with this size and stream.
        unsafe { mr.deallocate(warm, 64, &stream).unwrap() };
        tracing::subscriber::with_default(records, || {
            tracing::callsite::rebuild_interest_cache();
            let ptr = mr.allocate(64, &stream).unwrap();
            // SAFETY: allocated just above with this size and stream.
            unsafe { mr.deallocate(ptr, 64, &stream).unwrap() };
        });
        let records = records.0.lock().unwrap();
        let [(target, allocate), (_, deallocate)] = &records[..] else {
            panic!("two events, got {records:?}");
        };
        assert_eq!(allocate.logger_name(target), "app.memory");
        let line = allocate.summary();
        // The seed's order: device, nbytes, ptr, stream.
        assert!(
            line.starts_with("allocate device=cpu:0 nbytes=64 ptr=0x"),
            "{line}"
        );
        assert!(line.ends_with(" stream=0"), "{line}");
        assert!(
            deallocate
                .summary()
                .starts_with("deallocate device=cpu:0 nbytes=64 ptr=0x")
        );
        let unnamed = LogRecord::default();
        assert_eq!(unnamed.logger_name(LOG_TARGET), "devmm.mr");
    }
}
