use std::fmt;

use crate::error::{CallbackError, Error, Result};
use crate::ptr::DevicePtr;
use crate::resource::{MemoryInfo, MemoryResource};
use crate::stream::Stream;

type Callback = dyn Fn(usize, usize, &Error) -> Result<bool, CallbackError> + Send + Sync;

/// Gives a callback the chance to free memory when its upstream runs out,
/// and retries while the callback asks to, as rmm's
/// `failure_callback_resource_adaptor`.
///
/// On an out-of-memory error from upstream ([`Error::is_out_of_memory`]:
/// the driver's, a [`LimitingAdaptor`](crate::LimitingAdaptor)'s, a
/// callback's refusal for want of memory) the callback is called with
/// `(nbytes, attempt, &error)`: the size asked, the number of failures of
/// this request so far (1 on the first), and that failure. It may free
/// memory (drop a cache, trim a pool, synchronize a stream so deferred
/// frees complete) and returns whether to try again. `false` returns the
/// last failure, its chain prefixed with this adaptor. Other errors are
/// returned untouched, without calling it.
///
/// The adaptor loops for as long as the callback returns `true`, as rmm's
/// does: a callback that always says retry without freeing anything
/// retries forever. Bound it with `attempt`.
///
/// A callback that fails returns [`Error::Callback`] with its error as the
/// source (a binding chains the out-of-memory error to it).
///
/// ```
/// use devmm::{FailureCallbackAdaptor, LimitingAdaptor, MallocMemoryResource, MemoryResource, Stream};
/// let mr = FailureCallbackAdaptor::new(
///     LimitingAdaptor::new(MallocMemoryResource::new(), 64),
///     |_nbytes, attempt, _error| Ok(attempt < 3),
/// );
/// let err = mr.allocate(100, &Stream::cpu()).unwrap_err();
/// assert!(err.is_out_of_memory());
/// assert!(err.to_string().contains("FailureCallbackAdaptor -> LimitingAdaptor"));
/// ```
pub struct FailureCallbackAdaptor<U> {
    upstream: super::upstream::Upstream<U>,
    probes: super::UpstreamProbes,
    callback: Box<Callback>,
}

impl<U: fmt::Debug> fmt::Debug for FailureCallbackAdaptor<U> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FailureCallbackAdaptor")
            .field("upstream", &self.upstream)
            .finish_non_exhaustive()
    }
}

impl<U: MemoryResource> FailureCallbackAdaptor<U> {
    /// Wraps `upstream`, calling `callback(nbytes, attempt, &error)` on
    /// each out-of-memory failure.
    pub fn new(
        upstream: U,
        callback: impl Fn(usize, usize, &Error) -> Result<bool, CallbackError> + Send + Sync + 'static,
    ) -> Self {
        FailureCallbackAdaptor {
            upstream: super::upstream::Upstream::new(upstream),
            probes: super::UpstreamProbes::new(),
            callback: Box::new(callback),
        }
    }

    /// The wrapped resource.
    pub fn get_upstream(&self) -> &U {
        &self.upstream
    }

    /// The failure path: the callback, and a retry while it asks for one.
    #[cold]
    #[inline(never)]
    fn recover(&self, nbytes: usize, stream: &Stream, mut error: Error) -> Result<DevicePtr> {
        let mut attempt = 1_usize;
        loop {
            if !error.is_out_of_memory() {
                return Err(error);
            }
            match (self.callback)(nbytes, attempt, &error) {
                Ok(true) => {}
                Ok(false) => return Err(error.through("FailureCallbackAdaptor")),
                Err(source) => {
                    return Err(Error::callback(
                        "FailureCallbackAdaptor callback",
                        Some(self.device()),
                        source,
                    ));
                }
            }
            match self.upstream.allocate(nbytes, stream) {
                Ok(ptr) => return Ok(ptr),
                Err(again) => error = again,
            }
            attempt = attempt.saturating_add(1);
        }
    }
}

impl<U: MemoryResource> MemoryResource for FailureCallbackAdaptor<U> {
    #[inline(always)]
    fn allocate(&self, nbytes: usize, stream: &Stream) -> Result<DevicePtr> {
        match self.upstream.allocate(nbytes, stream) {
            Ok(ptr) => Ok(ptr),
            Err(error) => self.recover(nbytes, stream, error),
        }
    }

    #[inline(always)]
    unsafe fn deallocate(&self, ptr: DevicePtr, nbytes: usize, stream: &Stream) -> Result<()> {
        // SAFETY: forwarded verbatim; the caller upholds the contract.
        unsafe { self.upstream.deallocate(ptr, nbytes, stream) }
    }

    forward_probes!(upstream: U, probes);

    fn available_memory(&self) -> Result<MemoryInfo> {
        self.upstream.available_memory()
    }

    fn runs_callbacks(&self) -> bool {
        true
    }
}
