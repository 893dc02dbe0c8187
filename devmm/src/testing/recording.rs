//! `RecordingMemoryResource`: an allocator double with fake pointers.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::{Mutex, MutexGuard};

use crate::device::Device;
use crate::error::{Error, MisuseKind, Result};
use crate::ptr::DevicePtr;
use crate::resource::{MemoryInfo, MemoryResource};
use crate::size::round_up;
use crate::stream::Stream;

/// The alignment of a recording resource made by `new` or `on_device`,
/// and so its first address.
pub const RECORDING_DEFAULT_ALIGNMENT: usize = 256;

/// The fake address space of a recording resource unless configured.
pub const RECORDING_DEFAULT_CAPACITY: usize = 1 << 40;

/// One call a [`RecordingMemoryResource`] received, with its arguments
/// as passed and what it answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordedCall {
    /// `allocate(nbytes, stream)`.
    Allocate {
        /// The size asked.
        nbytes: usize,
        /// The stream passed.
        stream: Stream,
        /// The pointer handed out, or the error.
        result: Result<DevicePtr>,
    },
    /// `deallocate(ptr, nbytes, stream)`.
    Deallocate {
        /// The pointer passed.
        ptr: DevicePtr,
        /// The size passed.
        nbytes: usize,
        /// The stream passed.
        stream: Stream,
        /// `Ok` or the misuse detected.
        result: Result<()>,
    },
}

#[derive(Debug)]
struct RecordingState {
    next: usize,
    live: BTreeMap<usize, usize>,
    freed: BTreeSet<usize>,
    calls: Vec<RecordedCall>,
}

/// A memory resource that allocates nothing: it hands out deterministic
/// fake addresses (the alignment first, then each next one past the last
/// allocation, rounded up to the alignment, never reused), logs every call verbatim,
/// tracks live allocations, and reports misuse as [`Error::Misuse`].
///
/// Its pointers must never be dereferenced; it exists to observe what code
/// asks of a resource, and when.
///
/// ```
/// use std::collections::BTreeMap;
/// use std::sync::Arc;
/// use devmm::testing::RecordingMemoryResource;
/// use devmm::{DeviceBuffer, Stream};
/// let recording = Arc::new(RecordingMemoryResource::new());
/// let stream = Stream::cpu();
/// let buf = DeviceBuffer::new(64, recording.clone(), &stream)?;
/// assert_eq!(recording.live(), BTreeMap::from([(256, 64)]));
/// buf.free(&stream)?;
/// assert_eq!(recording.live(), BTreeMap::new());
/// assert_eq!(recording.calls().len(), 2);
/// # Ok::<(), devmm::Error>(())
/// ```
pub struct RecordingMemoryResource {
    device: Device,
    alignment: usize,
    stream_ordered: bool,
    capacity: usize,
    state: Mutex<RecordingState>,
}

impl RecordingMemoryResource {
    /// A recording resource on the CPU with 256-byte alignment.
    pub fn new() -> RecordingMemoryResource {
        RecordingMemoryResource::on_device(Device::CPU)
    }

    /// A recording resource claiming to allocate on `device`, with 256-byte
    /// alignment (what cudaMalloc guarantees).
    pub fn on_device(device: Device) -> RecordingMemoryResource {
        RecordingMemoryResource {
            device,
            alignment: RECORDING_DEFAULT_ALIGNMENT,
            stream_ordered: false,
            capacity: RECORDING_DEFAULT_CAPACITY,
            state: Mutex::new(RecordingState {
                next: RECORDING_DEFAULT_ALIGNMENT,
                live: BTreeMap::new(),
                freed: BTreeSet::new(),
                calls: Vec::new(),
            }),
        }
    }

    /// A recording resource on `device` aligning to `alignment`, a power of
    /// two; its first address is `alignment` (the seed's rule: the
    /// smallest non-null address that keeps the promise).
    ///
    /// ```
    /// use devmm::testing::RecordingMemoryResource;
    /// use devmm::{MemoryResource, Stream};
    /// let mr = RecordingMemoryResource::with_alignment(devmm::Device::CPU, 4096)?;
    /// assert_eq!(mr.allocate(8, &Stream::cpu())?.addr(), 4096);
    /// let bytes = RecordingMemoryResource::with_alignment(devmm::Device::CPU, 1)?;
    /// let first = bytes.allocate(3, &Stream::cpu())?.addr();
    /// assert_eq!((first, bytes.allocate(3, &Stream::cpu())?.addr()), (1, 4));
    /// assert!(RecordingMemoryResource::with_alignment(devmm::Device::CPU, 48).is_err());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn with_alignment(device: Device, alignment: usize) -> Result<RecordingMemoryResource> {
        if !alignment.is_power_of_two() {
            return Err(Error::InvalidArgument {
                reason: format!(
                    "RecordingMemoryResource alignment must be a power of two, not {alignment}"
                ),
            });
        }
        let mut mr = RecordingMemoryResource::on_device(device);
        mr.alignment = alignment;
        mr.state.get_mut().unwrap_or_else(|e| e.into_inner()).next = alignment;
        Ok(mr)
    }

    /// Limits the fake address space to `capacity` bytes: allocations
    /// past it fail with [`Error::OutOfMemory`]. Addresses are never reused,
    /// so the space is spent by every allocation, live or not.
    ///
    /// ```
    /// use devmm::{testing::RecordingMemoryResource, MemoryResource, Stream};
    /// let mr = RecordingMemoryResource::new().with_capacity(512);
    /// assert!(mr.allocate(256, &Stream::cpu()).is_ok());
    /// assert!(mr.allocate(512, &Stream::cpu()).unwrap_err().is_out_of_memory());
    /// ```
    pub fn with_capacity(mut self, capacity: usize) -> RecordingMemoryResource {
        self.capacity = capacity;
        self
    }

    /// Makes the resource claim stream-ordered allocation (it claims
    /// synchronous allocation unless told), to stand in for either kind.
    ///
    /// ```
    /// use devmm::{testing::RecordingMemoryResource, MemoryResource};
    /// assert!(!RecordingMemoryResource::new().stream_ordered());
    /// assert!(RecordingMemoryResource::new().with_stream_ordered(true).stream_ordered());
    /// ```
    pub fn with_stream_ordered(mut self, stream_ordered: bool) -> RecordingMemoryResource {
        self.stream_ordered = stream_ordered;
        self
    }

    fn state(&self) -> MutexGuard<'_, RecordingState> {
        // Each update is a few inserts and a push; a panic elsewhere cannot
        // leave the state half-written.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The live allocations: address to size.
    pub fn live(&self) -> BTreeMap<usize, usize> {
        self.state().live.clone()
    }

    /// Every call received so far, oldest first.
    pub fn calls(&self) -> Vec<RecordedCall> {
        self.state().calls.clone()
    }

    /// Forgets the calls logged so far, so a test can look at the next
    /// phase alone; the live allocations and misuse detection are kept.
    ///
    /// ```
    /// use devmm::testing::RecordingMemoryResource;
    /// use devmm::{DeviceBuffer, Stream};
    /// let recording = std::sync::Arc::new(RecordingMemoryResource::new());
    /// let buf = DeviceBuffer::new(64, recording.clone(), &Stream::cpu())?;
    /// recording.clear_calls();
    /// buf.free(&Stream::cpu())?;
    /// assert_eq!(recording.calls().len(), 1);
    /// assert!(recording.live().is_empty());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn clear_calls(&self) {
        self.state().calls.clear();
    }

    fn allocate_locked(&self, state: &mut RecordingState, nbytes: usize) -> Result<DevicePtr> {
        if nbytes == 0 {
            return Ok(DevicePtr::NULL);
        }
        let addr = state.next;
        let end = addr
            .checked_add(nbytes)
            .filter(|&end| end - self.alignment <= self.capacity);
        let next = end.and_then(|end| round_up(end, self.alignment, "fake address").ok());
        let Some(next) = next else {
            return Err(Error::OutOfMemory {
                device: self.device,
                nbytes,
                chain: crate::resource::resource_chain(self),
                detail: Some(format!(
                    "the fake address space of {} bytes is spent",
                    self.capacity
                )),
                pool: None,
            });
        };
        state.next = next;
        state.live.insert(addr, nbytes);
        Ok(DevicePtr::from_addr(addr))
    }

    fn deallocate_locked(
        &self,
        state: &mut RecordingState,
        ptr: DevicePtr,
        nbytes: usize,
    ) -> Result<()> {
        if ptr.is_null() && nbytes == 0 {
            return Ok(());
        }
        let kind = match state.live.get(&ptr.addr()) {
            Some(&allocated) if allocated == nbytes => {
                state.live.remove(&ptr.addr());
                state.freed.insert(ptr.addr());
                return Ok(());
            }
            Some(&allocated) => MisuseKind::WrongSize { allocated },
            None if state.freed.contains(&ptr.addr()) => MisuseKind::DoubleFree,
            None => MisuseKind::UnknownPointer,
        };
        Err(Error::Misuse {
            kind,
            ptr,
            nbytes,
            device: self.device,
            resource: format!("{self:?}"),
            test_double: true,
        })
    }
}

impl Default for RecordingMemoryResource {
    fn default() -> Self {
        RecordingMemoryResource::new()
    }
}

impl fmt::Debug for RecordingMemoryResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "RecordingMemoryResource(device={}, alignment={})",
            self.device, self.alignment
        )
    }
}

impl MemoryResource for RecordingMemoryResource {
    fn allocate(&self, nbytes: usize, stream: &Stream) -> Result<DevicePtr> {
        let mut state = self.state();
        let result = self.allocate_locked(&mut state, nbytes);
        state.calls.push(RecordedCall::Allocate {
            nbytes,
            stream: stream.clone(),
            result: result.clone(),
        });
        result
    }

    unsafe fn deallocate(&self, ptr: DevicePtr, nbytes: usize, stream: &Stream) -> Result<()> {
        let mut state = self.state();
        let result = self.deallocate_locked(&mut state, ptr, nbytes);
        state.calls.push(RecordedCall::Deallocate {
            ptr,
            nbytes,
            stream: stream.clone(),
            result: result.clone(),
        });
        result
    }

    fn device(&self) -> Device {
        self.device
    }

    fn guaranteed_alignment(&self) -> usize {
        self.alignment
    }

    fn stream_ordered(&self) -> bool {
        self.stream_ordered
    }

    fn available_memory(&self) -> Result<MemoryInfo> {
        let spent = self.state().next - self.alignment;
        Ok(MemoryInfo {
            free: self.capacity.saturating_sub(spent),
            total: self.capacity,
        })
    }

    fn detects_misuse(&self) -> bool {
        true
    }

    fn live_count(&self) -> Option<usize> {
        Some(self.state().live.len())
    }
}
