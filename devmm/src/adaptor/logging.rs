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
    upstream: U,
    logger: Option<Box<str>>,
}

impl<U: MemoryResource> LoggingAdaptor<U> {
    /// Wraps `upstream`.
    pub fn new(upstream: U) -> Self {
        LoggingAdaptor {
            upstream,
            logger: None,
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
            upstream,
            logger: Some(logger.into()),
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
                ptr = ptr.addr(),
                nbytes,
                stream = stream.handle(),
                device = %self.upstream.device(),
                logger = self.logger(),
            ),
            Err(error) => tracing::warn!(
                target: LOG_TARGET,
                op = "allocate",
                nbytes,
                stream = stream.handle(),
                device = %self.upstream.device(),
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
                ptr = ptr.addr(),
                nbytes,
                stream = stream.handle(),
                device = %self.upstream.device(),
                logger = self.logger(),
            ),
            Err(error) => tracing::warn!(
                target: LOG_TARGET,
                op = "deallocate",
                ptr = ptr.addr(),
                nbytes,
                stream = stream.handle(),
                device = %self.upstream.device(),
                logger = self.logger(),
                %error,
            ),
        }
        result
    }

    fn available_memory(&self) -> Result<MemoryInfo> {
        self.upstream.available_memory()
    }

    forward_probes!(upstream);
}
