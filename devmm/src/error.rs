//! The one error type of devmm.
//!
//! Every variant says what was asked, on which device, through which resource
//! chain, and what to do about it, so a message read in a log is enough to act.

use std::fmt;
use std::sync::Arc;

use crate::device::{Device, ParseDeviceError};
use crate::pool_statistics::PoolStatistics;
use crate::ptr::DevicePtr;

/// Result alias used throughout devmm.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong. Variants are stable and meant to be matched.
///
/// ```
/// use devmm::{Error, LimitingAdaptor, MallocMemoryResource, MemoryResource, Stream};
/// let mr = LimitingAdaptor::new(MallocMemoryResource::new(), 64);
/// match mr.allocate(65, &Stream::cpu()) {
///     Err(Error::LimitExceeded { nbytes, limit, .. }) => assert_eq!((nbytes, limit), (65, 64)),
///     other => panic!("expected a limit error, got {other:?}"),
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The resource could not find `nbytes` on `device`.
    #[error(
        "out of memory: failed to allocate {nbytes} bytes on {device} through {chain}{}; \
         free buffers you no longer need, or allocate less",
        detail.as_deref().map(|d| format!(" ({d})")).unwrap_or_default()
    )]
    OutOfMemory {
        /// The device asked.
        device: Device,
        /// The size asked.
        nbytes: usize,
        /// The resource chain, outermost first (`StatisticsAdaptor -> MallocMemoryResource(...)`).
        chain: String,
        /// What the platform allocator said, when it said anything.
        detail: Option<String>,
        /// The figures of the pool the memory was asked from, when the
        /// resource draws from a pool of its own (`CudaAsyncMemoryResource`,
        /// `HipAsyncMemoryResource`); `None` otherwise. The message repeats
        /// them in `detail`.
        pool: Option<PoolStatistics>,
    },

    /// A [`LimitingAdaptor`](crate::LimitingAdaptor) refused the request
    /// without asking its upstream.
    #[error(
        "limit exceeded: allocation of {nbytes} bytes on {device} would exceed the {limit}-byte \
         limit ({in_use} bytes in use) in {chain}; free buffers or raise limit_bytes"
    )]
    LimitExceeded {
        /// The device asked.
        device: Device,
        /// The size asked.
        nbytes: usize,
        /// The adaptor's limit.
        limit: usize,
        /// Bytes already allocated through the adaptor.
        in_use: usize,
        /// The resource chain, outermost first.
        chain: String,
    },

    /// A shape, dtype, stride set or layout policy that cannot describe memory.
    #[error("invalid layout: {reason}")]
    InvalidLayout {
        /// What is wrong and what to write instead.
        reason: String,
    },

    /// A resource detected a call that breaks its contract.
    #[error("misuse of {resource} on {device}: {kind} (pointer {ptr}, {nbytes} bytes)")]
    Misuse {
        /// What the caller did wrong.
        kind: MisuseKind,
        /// The pointer passed.
        ptr: DevicePtr,
        /// The size passed.
        nbytes: usize,
        /// The device of the resource.
        device: Device,
        /// The resource that noticed.
        resource: String,
        /// Whether the resource that noticed is a test double
        /// ([`testing::RecordingMemoryResource`](crate::testing::RecordingMemoryResource)),
        /// whose reports are test failures rather than refused frees
        /// (Python raises its `RecordingMisuseError`, wherever the call came from).
        test_double: bool,
    },

    /// A buffer was used after [`DeviceBuffer::free`](crate::DeviceBuffer::free).
    #[error(
        "buffer of {nbytes} bytes on {device} is closed: it was freed (use-after-free); allocate a \
         new buffer"
    )]
    BufferClosed {
        /// The device of the buffer.
        device: Device,
        /// Its size.
        nbytes: usize,
    },

    /// A write to memory its producer lent read-only (a DLPack import
    /// flagged `READ_ONLY`).
    #[error(
        "cannot {operation}: the buffer of {nbytes} bytes on {device} is read-only (its producer \
         lent it read-only); copy it into a new buffer and write there"
    )]
    ReadOnly {
        /// What was asked (`"copy 2 bytes from the host into it"`).
        operation: String,
        /// The device of the buffer.
        device: Device,
        /// Its size.
        nbytes: usize,
    },

    /// A value did not parse.
    #[error("{what} {input:?}: expected {expected}")]
    Parse {
        /// What is wrong with the text, naming what was parsed
        /// ("unknown dtype string", "malformed device string", ...).
        what: &'static str,
        /// The text given.
        input: String,
        /// The accepted forms.
        expected: String,
    },

    /// An argument outside what the callee accepts.
    #[error("invalid argument: {reason}")]
    InvalidArgument {
        /// What was passed and what is accepted.
        reason: String,
    },

    /// An argument the callee refuses, whose message is the whole text: it
    /// names the argument, what is accepted and what was given (a number
    /// out of range, see [`Error::in_range`]; a device a resource does not
    /// serve, see [`device_for`](crate::device_for); ...).
    #[error("{reason}")]
    Refused {
        /// The argument, what it accepts and the value given.
        reason: String,
    },

    /// No runtime serves the device or name asked for.
    #[error("runtime {name:?} is unavailable: {reason}")]
    RuntimeUnavailable {
        /// The runtime asked for.
        name: String,
        /// Why it is missing and how to get it.
        reason: String,
    },

    /// A driver call returned an error status; `source` is the driver's
    /// own error.
    #[error(
        "{} failed{} with {} ({}): {}",
        .source.call,
        device.map(|d| format!(" on {d}")).unwrap_or_default(),
        .source.name,
        .source.code,
        .source.message
    )]
    Driver {
        /// The device the call was made for, when it was made for one.
        device: Option<Device>,
        /// The call, its status code and the driver's name and description.
        #[source]
        source: DriverError,
    },

    /// A GPU runtime was used in a process forked after the runtime started
    /// in its parent. The runtime belongs to the process that started it
    /// (fork() copies none of its driver state or threads), so devmm refuses
    /// before calling the driver; memory the child inherited is the
    /// parent's, and the child never frees it (Python: `RuntimeError`).
    ///
    /// ```
    /// use devmm::{Device, Error};
    /// let err = Error::ForkedAfterStart {
    ///     runtime: "cuda".into(),
    ///     device: Device::cuda(0),
    ///     parent: 100,
    ///     child: 101,
    /// };
    /// assert!(err.to_string().contains("use the `spawn` start method"));
    /// ```
    #[error(
        "cannot use {device}: the {runtime} runtime started in process {parent}, and this process \
         ({child}) was forked from it afterwards, so the runtime is not this process's to use \
         (its memory is left to the parent); use the `spawn` start method for worker processes \
         (multiprocessing.get_context(\"spawn\"), or ProcessPoolExecutor(mp_context=...)), or \
         start the GPU runtime only in the children"
    )]
    ForkedAfterStart {
        /// The runtime (`cuda`, `rocm`).
        runtime: String,
        /// The device the refused call was for.
        device: Device,
        /// The process the runtime started in.
        parent: u32,
        /// This process.
        child: u32,
    },

    /// A DLPack export was refused (Python: `BufferError`).
    ///
    /// The message is the reason verbatim, a whole sentence that says what
    /// to do instead, because Python shows it as the `BufferError` text.
    #[error("{reason}")]
    Dlpack {
        /// Why the export was refused and what to do instead.
        reason: String,
    },

    /// A path that dereferences memory (a host copy, NumPy's allocator) was
    /// refused because the resource does not declare its pointers
    /// [`dereferenceable`](crate::MemoryResource::dereferenceable).
    #[error(
        "{operation} through {chain} on {device} was refused: the resource does not declare its \
         pointers dereferenceable (real memory of its device); declare it (Rust: \
         `MemoryResource::dereferenceable`, Python: `dereferenceable = True`) only if they are"
    )]
    NotDereferenceable {
        /// What would have dereferenced the memory ("a host copy").
        operation: &'static str,
        /// The resource's device.
        device: Device,
        /// The resource chain, outermost first.
        chain: String,
    },

    /// An adaptor's byte counter would overflow `usize`. The allocation
    /// was given back to the upstream before this was returned.
    #[error(
        "counter overflow: allocating {nbytes} bytes on {device} through {chain} would overflow \
         the {counter} counter; the allocation was returned upstream; free buffers, or count \
         through a fresh adaptor"
    )]
    CounterOverflow {
        /// The device asked.
        device: Device,
        /// The size asked.
        nbytes: usize,
        /// The counter that would overflow ("current_bytes").
        counter: &'static str,
        /// The resource chain, outermost first.
        chain: String,
    },

    /// Freeing a buffer failed; the buffer is still live, and
    /// [`DeviceBuffer::free`](crate::DeviceBuffer::free) may be called again.
    /// Dropped or collected without that, its memory is given up, never
    /// deallocated a second time behind the caller's back.
    #[error(
        "freeing the buffer of {nbytes} bytes on {device} failed, so the buffer is still live: \
         fix the cause and call free() again; dropped without that, its memory is given up, \
         not freed ({source})"
    )]
    FreeFailed {
        /// The device of the buffer.
        device: Device,
        /// Its size.
        nbytes: usize,
        /// Why the resource could not free it.
        source: Box<Error>,
    },

    /// Code a resource called back failed: a closure of a
    /// [`CallbackMemoryResource`](crate::CallbackMemoryResource), a method
    /// of a Python-defined resource. `source` is that code's own error,
    /// unchanged, so a binding can take it back out
    /// ([`CallbackError::downcast_ref`]) and raise it as it was raised.
    #[error(
        "{callback} failed{}: {source}",
        device.map(|d| format!(" on {d}")).unwrap_or_default()
    )]
    Callback {
        /// What was called (`ArenaResource.allocate`).
        callback: String,
        /// The device it was called for, when it was called for one.
        device: Option<Device>,
        /// The error the callback returned or raised.
        #[source]
        source: CallbackError,
    },

    /// Making one stream wait for another failed in the driver (the
    /// event a GPU hand-off records and waits on); `source` is the driver's
    /// error. Python raises it as `StreamError`, the seed's exception for
    /// hand-off failures.
    #[error(
        "stream hand-off failed: {source}; the consumer does not wait for the producer, so \
         synchronize the producer stream before using its work"
    )]
    Handoff {
        /// The device of both streams.
        device: Device,
        /// The driver call that failed.
        source: Box<Error>,
    },

    /// A file devmm writes could not be created or written (a trace's
    /// file, its header): the operating system's error, with its number.
    /// Python raises it as `OSError`.
    #[error("{what}: {reason}")]
    Io {
        /// What was being done, and to which file.
        what: String,
        /// The operating system's words for the failure.
        reason: String,
        /// Its error number, when it has one (`ENOSPC`: 28).
        errno: Option<i32>,
    },

    /// A stream operation that cannot be done as asked.
    #[error("stream error on {device}: {reason}")]
    Stream {
        /// The stream's device.
        device: Device,
        /// What was asked and why it cannot be done.
        reason: String,
    },

    /// An operation refused because a stream it involves is capturing a
    /// graph (CUDA graphs, HIP graphs): the driver would fail it and
    /// invalidate the capture, or record it into the graph where it does
    /// not belong. Refused before any driver call, so the capture goes on.
    /// Python raises it as `StreamError`.
    #[error(
        "{operation} on {device} was refused: the stream is capturing a graph (stream capture) \
         and {reason}"
    )]
    StreamCapture {
        /// The device of the stream.
        device: Device,
        /// What was asked (`synchronizing the stream`).
        operation: String,
        /// Why it cannot be part of the capture, and what to do instead.
        reason: String,
    },

    /// A call through a chain of adaptors nested deeper than devmm follows:
    /// each link takes native stack, so a chain of thousands would
    /// overflow it and abort the process.
    #[error(
        "{operation} on {device} went through more than {limit} adaptors, deeper than devmm \
         follows (each link takes native stack); build a shorter chain: {chain} (the link \
         reached at that depth)"
    )]
    ChainTooDeep {
        /// What was asked (`allocate`, `deallocate`, `available_memory`).
        operation: &'static str,
        /// The device of the resource reached.
        device: Device,
        /// The most adaptors a call goes through.
        limit: usize,
        /// The resource chain from the link reached at that depth.
        chain: String,
    },
    /// A copy of a tensor ([`Tensor::to`](crate::Tensor::to)) between two
    /// devices devmm does not copy between (two GPUs, a GPU and another
    /// platform's, memory types it has no copy for). Python raises it as
    /// `ValueError`.
    #[error("cannot copy a tensor from {from} to {to}: {reason}")]
    CannotCopy {
        /// The source tensor's device.
        from: Device,
        /// The device asked for.
        to: Device,
        /// Why, and what to do instead.
        reason: String,
    },

    /// An override ended out of order, or one not in force in the caller's
    /// context was ended ([`exit_override`](crate::exit_override)).
    #[error("{reason}")]
    OverrideOrder {
        /// What was ended, and how to end overrides instead.
        reason: String,
    },
}

/// A status a driver call returned: the call, the code and what the
/// driver says about it. The source of [`Error::Driver`].
///
/// ```
/// use devmm::DriverError;
/// let e = DriverError {
///     call: "cudaMalloc",
///     code: 2,
///     name: "cudaErrorMemoryAllocation".into(),
///     message: "out of memory".into(),
/// };
/// assert_eq!(e.to_string(), "cudaMalloc returned cudaErrorMemoryAllocation (2): out of memory");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{call} returned {name} ({code}): {message}")]
pub struct DriverError {
    /// The C function that failed (`cudaMalloc`).
    pub call: &'static str,
    /// The status code.
    pub code: i32,
    /// The status's symbolic name (`cudaErrorMemoryAllocation`).
    pub name: String,
    /// The driver's description of the status.
    pub message: String,
}

/// The error of a failed callback, the source of [`Error::Callback`]:
/// shared (so [`Error`] stays `Clone`), compared by identity. A callback
/// that refused for want of memory (a Python `MemoryError`) says so with
/// [`CallbackError::out_of_memory`], and the error then counts as
/// [`Error::is_out_of_memory`] like the core's own.
///
/// ```
/// use devmm::{CallbackError, Device, Error};
/// #[derive(Debug, thiserror::Error)]
/// #[error("arena exhausted")]
/// struct Exhausted;
/// let err = Error::callback("Arena.allocate", Some(Device::CPU), CallbackError::new(Exhausted));
/// assert_eq!(err.to_string(), "Arena.allocate failed on cpu:0: arena exhausted");
/// let Error::Callback { source, .. } = &err else { unreachable!() };
/// assert!(source.downcast_ref::<Exhausted>().is_some());
/// assert_eq!(err.clone(), err);
/// assert!(!err.is_out_of_memory());
/// let full = CallbackError::out_of_memory(Exhausted);
/// assert!(Error::callback("Arena.allocate", None, full).is_out_of_memory());
/// ```
#[derive(Clone)]
pub struct CallbackError {
    error: Arc<dyn std::error::Error + Send + Sync>,
    out_of_memory: bool,
}

impl CallbackError {
    /// Wraps `err`, a failure of the callback's own.
    pub fn new(err: impl std::error::Error + Send + Sync + 'static) -> Self {
        CallbackError {
            error: Arc::new(err),
            out_of_memory: false,
        }
    }

    /// Wraps `err`, the callback's refusal for want of memory: not a bug,
    /// the condition a caller may recover from as from the core's own
    /// [`Error::OutOfMemory`].
    pub fn out_of_memory(err: impl std::error::Error + Send + Sync + 'static) -> Self {
        CallbackError {
            out_of_memory: true,
            ..CallbackError::new(err)
        }
    }

    /// Whether the callback refused for want of memory.
    pub fn is_out_of_memory(&self) -> bool {
        self.out_of_memory
    }

    /// The callback's error, if it is a `T`.
    pub fn downcast_ref<T: std::error::Error + 'static>(&self) -> Option<&T> {
        self.error.downcast_ref()
    }
}

impl fmt::Debug for CallbackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl fmt::Display for CallbackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for CallbackError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.source()
    }
}

impl PartialEq for CallbackError {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.error, &other.error)
    }
}

impl Eq for CallbackError {}

/// How a caller broke a resource's contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MisuseKind {
    /// The pointer was never allocated by this resource.
    UnknownPointer,
    /// The pointer is live but was allocated with another size.
    WrongSize {
        /// The size it was allocated with.
        allocated: usize,
    },
    /// The pointer was already deallocated.
    DoubleFree,
    /// The resource returned a null pointer for a non-empty request.
    NullAllocation,
    /// The resource handed out a pointer that breaks its own alignment promise.
    Misaligned {
        /// The alignment the resource promises.
        promised: usize,
    },
}

impl MisuseKind {
    /// The name the seed's Python devmm gives this misuse (`"double-free"`,
    /// `"foreign-free"`, `"size-mismatch"`), which leads its message; `None`
    /// for the resource's own faults, which the seed does not name.
    ///
    /// ```
    /// use devmm::MisuseKind;
    /// assert_eq!(MisuseKind::DoubleFree.seed_name(), Some("double-free"));
    /// assert!(MisuseKind::DoubleFree.to_string().starts_with("double-free: "));
    /// assert_eq!(MisuseKind::NullAllocation.seed_name(), None);
    /// ```
    pub fn seed_name(&self) -> Option<&'static str> {
        match self {
            MisuseKind::UnknownPointer => Some("foreign-free"),
            MisuseKind::WrongSize { .. } => Some("size-mismatch"),
            MisuseKind::DoubleFree => Some("double-free"),
            MisuseKind::NullAllocation | MisuseKind::Misaligned { .. } => None,
        }
    }
}

impl fmt::Display for MisuseKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(name) = self.seed_name() {
            write!(f, "{name}: ")?;
        }
        match self {
            MisuseKind::UnknownPointer => f.write_str(
                "the pointer is not a live allocation; this resource never allocated it",
            ),
            MisuseKind::WrongSize { allocated } => write!(
                f,
                "size mismatch freeing the pointer: deallocate with the wrong size; \
                 the pointer was allocated with {allocated} bytes"
            ),
            MisuseKind::DoubleFree => {
                f.write_str("the pointer is not a live allocation; it was already deallocated")
            }
            MisuseKind::NullAllocation => {
                f.write_str("allocate returned a null pointer for a non-empty request")
            }
            MisuseKind::Misaligned { promised } => write!(
                f,
                "allocate returned a pointer that is not aligned to the promised {promised} bytes"
            ),
        }
    }
}

impl Error {
    pub(crate) fn parse(what: &'static str, input: &str, expected: impl Into<String>) -> Error {
        Error::Parse {
            what,
            input: input.to_owned(),
            expected: expected.into(),
        }
    }

    /// `value` as a `T`, or an [`Error::Refused`] naming the argument
    /// `name` and the `range` it must be in.
    ///
    /// ```
    /// use devmm::Error;
    /// assert_eq!(Error::in_range::<u8>("bits", 8, "a bit width from 1 to 255"), Ok(8));
    /// let err = Error::in_range::<u8>("bits", 256, "a bit width from 1 to 255").unwrap_err();
    /// assert_eq!(err.to_string(), "bits must be a bit width from 1 to 255; 256 is out of range");
    /// ```
    pub fn in_range<T: TryFrom<i128>>(name: &str, value: i128, range: &str) -> Result<T> {
        T::try_from(value).map_err(|_| Error::out_of_range(name, value, range))
    }

    /// The [`Error::Refused`] for `value`, given for the argument `name`,
    /// outside the `range` it must be in ([`Error::in_range`]'s refusal,
    /// for bounds that are no type's).
    ///
    /// ```
    /// let err = devmm::Error::out_of_range("index", 1 << 31, "a device index from 0 to 2147483647");
    /// assert_eq!(
    ///     err.to_string(),
    ///     "index must be a device index from 0 to 2147483647; 2147483648 is out of range"
    /// );
    /// ```
    pub fn out_of_range(name: &str, value: i128, range: &str) -> Error {
        // The words live with devices, which refuse ordinals below `Error`.
        ParseDeviceError::out_of_range(name, value, range).into()
    }

    pub(crate) fn layout(reason: impl Into<String>) -> Error {
        Error::InvalidLayout {
            reason: reason.into(),
        }
    }

    /// An [`Error::Callback`]: `callback`, called for `device`, failed
    /// with `source`.
    pub fn callback(
        callback: impl Into<String>,
        device: Option<Device>,
        source: CallbackError,
    ) -> Error {
        Error::Callback {
            callback: callback.into(),
            device,
            source,
        }
    }

    /// Prefixes the resource chain of an allocation failure with an adaptor's
    /// name, so the message shows the whole stack the request went through.
    pub(crate) fn through(mut self, adaptor: &str) -> Error {
        if let Error::OutOfMemory { chain, .. } | Error::LimitExceeded { chain, .. } = &mut self {
            *chain = format!("{adaptor} -> {chain}");
        }
        self
    }

    /// Whether this error means "not enough memory" (OOM, a limit, or a
    /// callback's [`CallbackError::out_of_memory`]), the condition Python
    /// sees as `MemoryError`.
    ///
    /// ```
    /// # use devmm::{Device, Error};
    /// let e = Error::OutOfMemory {
    ///     device: Device::CPU,
    ///     nbytes: 1,
    ///     chain: "x".into(),
    ///     detail: None,
    ///     pool: None,
    /// };
    /// assert!(e.is_out_of_memory());
    /// ```
    pub fn is_out_of_memory(&self) -> bool {
        match self {
            Error::OutOfMemory { .. } | Error::LimitExceeded { .. } => true,
            Error::Callback { source, .. } => source.is_out_of_memory(),
            _ => false,
        }
    }
}

/// A device refusal as devmm's error: the variant its doc names, with the
/// same message, so `?` takes it into a [`Result`].
impl From<ParseDeviceError> for Error {
    fn from(err: ParseDeviceError) -> Error {
        match err {
            ParseDeviceError::Unrecognized {
                what,
                input,
                expected,
            } => Error::Parse {
                what,
                input,
                expected,
            },
            ParseDeviceError::Refused { reason } => Error::Refused { reason },
            ParseDeviceError::InvalidIndex { reason } => Error::InvalidArgument { reason },
        }
    }
}

/// What kind of failure an [`Error`] is: the one classification a binding
/// maps to its own exceptions (Python's are named per kind), exhaustive so
/// that a new kind is a compile error in every mapping until it is mapped.
///
/// ```
/// use devmm::{Aligned, ErrorKind, LimitingAdaptor, MallocMemoryResource, MemoryResource, RowMajor, Stream};
/// let mr = LimitingAdaptor::new(MallocMemoryResource::new(), 64);
/// let err = mr.allocate(65, &Stream::cpu()).unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::OutOfMemory);
/// assert_eq!(Aligned::new(RowMajor, 0, 64).unwrap_err().kind(), ErrorKind::InvalidValue);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Memory could not be had: out of memory or past a limit, with the
    /// failure's figures (Python: `devmm.OutOfMemoryError`, a `MemoryError`).
    OutOfMemory,
    /// No memory in another sense: a counter that cannot count the bytes,
    /// or a resource returning null for a non-empty request (`MemoryError`).
    MemoryExhausted,
    /// An argument or state the call cannot take: a bad layout, text,
    /// argument, stream or device, a closed or read-only buffer, misuse of a
    /// resource (`ValueError`).
    InvalidValue,
    /// A test double's report of misuse, which fails the test that made it
    /// (`devmm.testing.RecordingMisuseError`, an `AssertionError`).
    TestDoubleMisuse,
    /// No runtime serves the device, or its library is missing
    /// (`devmm.RuntimeUnavailableError`, an `ImportError`).
    RuntimeUnavailable,
    /// A chain of adaptors deeper than devmm follows (`RecursionError`).
    ChainTooDeep,
    /// A DLPack exchange refused (`BufferError`).
    Interchange,
    /// Stream ordering that cannot be kept: a failed hand-off, or a call
    /// refused while the stream is captured (`devmm.StreamError`, a
    /// `RuntimeError`).
    StreamOrder,
    /// A driver call failed, or a GPU runtime is used in a process forked
    /// after it started (`RuntimeError`).
    Driver,
    /// Calls made in an order the API does not allow: an override ended
    /// out of order or twice (`RuntimeError`).
    WrongOrder,
    /// A file could not be read or written (`OSError`).
    Io,
    /// A callback (a resource written in another language) failed: the
    /// binding gives back the callback's own error.
    Callback,
    /// A deallocation failed and the buffer is still live: its cause's
    /// kind decides, with a note that `free()` may be retried.
    FreeFailed,
}

impl Error {
    /// The [`ErrorKind`] of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::OutOfMemory { .. } | Error::LimitExceeded { .. } => ErrorKind::OutOfMemory,
            Error::CounterOverflow { .. }
            | Error::Misuse {
                kind: MisuseKind::NullAllocation,
                ..
            } => ErrorKind::MemoryExhausted,
            Error::Misuse {
                test_double: true, ..
            } => ErrorKind::TestDoubleMisuse,
            Error::InvalidLayout { .. }
            | Error::Parse { .. }
            | Error::InvalidArgument { .. }
            | Error::Refused { .. }
            | Error::Misuse { .. }
            | Error::Stream { .. }
            | Error::NotDereferenceable { .. }
            | Error::BufferClosed { .. }
            | Error::CannotCopy { .. }
            | Error::ReadOnly { .. } => ErrorKind::InvalidValue,
            Error::RuntimeUnavailable { .. } => ErrorKind::RuntimeUnavailable,
            Error::ChainTooDeep { .. } => ErrorKind::ChainTooDeep,
            Error::Dlpack { .. } => ErrorKind::Interchange,
            Error::Handoff { .. } | Error::StreamCapture { .. } => ErrorKind::StreamOrder,
            Error::Driver { .. } | Error::ForkedAfterStart { .. } => ErrorKind::Driver,
            Error::OverrideOrder { .. } => ErrorKind::WrongOrder,
            Error::Io { .. } => ErrorKind::Io,
            Error::Callback { .. } => ErrorKind::Callback,
            Error::FreeFailed { .. } => ErrorKind::FreeFailed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_range_names_the_argument_range_and_value() {
        assert_eq!(Error::in_range::<u16>("lanes", 4, "a lane count"), Ok(4));
        let err = Error::in_range::<u32>("index", -1, "a device index").unwrap_err();
        assert_eq!(
            err.to_string(),
            "index must be a device index; -1 is out of range"
        );
        assert!(matches!(err, Error::Refused { .. }));
    }
}
