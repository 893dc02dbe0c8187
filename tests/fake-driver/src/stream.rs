//! Streams and where their work runs. Every stream has a [`Queue`]: a created stream its own,
//! the legacy stream (`0`, and CUDA's `cudaStreamLegacy`) one per device, the per-thread stream
//! (`2`) one per calling thread and device. As on hardware, the legacy stream synchronises
//! with the blocking streams of its device: work queued on it waits for theirs, and work queued
//! on them waits for the legacy stream's.

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::thread::ThreadId;

use crate::capture::StreamKey;
use crate::platform::{Fault, Platform};
use crate::queue::{Job, Marker, Queue};
use crate::state::State;

/// `cudaStreamPerThread` / `hipStreamPerThread`.
const PER_THREAD: usize = 2;
/// `cudaStreamNonBlocking` / `hipStreamNonBlocking`.
const NON_BLOCKING: u32 = 0x1;

#[derive(Debug)]
pub(crate) struct Stream {
    pub(crate) device: c_int,
    pub(crate) flags: u32,
    pub(crate) queue: Queue,
}

/// The built-in streams' queues.
#[derive(Debug, Default)]
pub(crate) struct BuiltinQueues {
    legacy: HashMap<c_int, Queue>,
    per_thread: HashMap<(ThreadId, c_int), Queue>,
    /// Queues of destroyed streams: their work still runs, as on hardware.
    retired: Vec<Queue>,
}

impl BuiltinQueues {
    /// Keeps a destroyed stream's queue until its work has run.
    pub(crate) fn retire(&mut self, queue: Queue) {
        self.retired.retain(|q| !q.marker().is_done());
        self.retired.push(queue);
    }
}

/// A resolved stream handle: its device, its queue, and how it orders with the legacy stream.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) device: c_int,
    /// Which stream it is, for stream capture.
    pub(crate) key: StreamKey,
    queue: Queue,
    ordering: Ordering,
}

impl Target {
    /// The work queued on the stream so far.
    pub(crate) fn marker(&self) -> Marker {
        self.queue.marker()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ordering {
    Legacy,
    Blocking,
    NonBlocking,
}

/// Resolves `stream` and checks it belongs to the calling thread's current device, as every
/// call taking a stream does on hardware. Such a call needs a context on the device, so, as the
/// runtime's lazy initialisation does, it creates the current device's primary context if the
/// thread's device never had one (a built-in stream on a fresh thread's device 0, say).
pub(crate) fn resolve(
    state: &mut State,
    platform: &Platform,
    stream: *mut c_void,
) -> Result<Target, Fault> {
    resolve_as(state, platform, stream, LegacyUse::Work)
}

/// What a call does with the legacy stream it was handed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LegacyUse {
    /// Queues or waits on it: refused while a blocking stream captures, which invalidates
    /// that capture.
    Work,
    /// Only asks about it (`*StreamIsCapturing`): refused all the same, but "the blocking
    /// stream capture is not invalidated" (the runtime API reference).
    Query,
}

/// [`resolve`], for a call that uses the legacy stream as `legacy` says.
pub(crate) fn resolve_as(
    state: &mut State,
    platform: &Platform,
    stream: *mut c_void,
    legacy: LegacyUse,
) -> Result<Target, Fault> {
    let handle = stream as usize;
    let current = state.devices.current_with_context()?;
    if !platform.is_builtin_stream(handle) {
        let created = state.streams.get(handle)?;
        if created.device != current {
            return Err(Fault::DeviceMismatch);
        }
        let ordering = if created.flags & NON_BLOCKING != 0 {
            Ordering::NonBlocking
        } else {
            Ordering::Blocking
        };
        return Ok(Target {
            device: created.device,
            key: StreamKey::Created(handle),
            queue: created.queue.clone(),
            ordering,
        });
    }
    let builtin = &mut state.builtin_queues;
    let (queue, ordering, key) = if handle == PER_THREAD {
        let thread = std::thread::current().id();
        (
            builtin
                .per_thread
                .entry((thread, current))
                .or_default()
                .clone(),
            Ordering::Blocking,
            StreamKey::PerThread(thread, current),
        )
    } else {
        // The legacy stream synchronizes with the blocking streams: none of them may capture.
        let streams = &state.streams;
        let blocking = |key: StreamKey| match key {
            StreamKey::Created(handle) => streams
                .get(handle)
                .is_ok_and(|s| s.flags & NON_BLOCKING == 0),
            StreamKey::PerThread(..) | StreamKey::Legacy(_) => true,
        };
        state
            .captures
            .check_legacy_use(current, blocking, legacy == LegacyUse::Work)?;
        (
            builtin.legacy.entry(current).or_default().clone(),
            Ordering::Legacy,
            StreamKey::Legacy(current),
        )
    };
    Ok(Target {
        device: current,
        key,
        queue,
        ordering,
    })
}

/// Queues `job` on `target`, after the legacy stream's work for a blocking stream and after
/// every blocking stream's work of the device for the legacy stream. On a capturing stream the
/// job becomes a node of the capture's graph instead, and does not run.
pub(crate) fn submit(state: &mut State, target: &Target, job: Job) -> Result<(), Fault> {
    if state.captures.capture_work(target.key)? {
        return Ok(());
    }
    let mut waits: Vec<Marker> = Vec::new();
    match target.ordering {
        Ordering::NonBlocking => {}
        Ordering::Blocking => {
            if let Some(legacy) = state.builtin_queues.legacy.get(&target.device) {
                waits.push(legacy.marker());
            }
        }
        Ordering::Legacy => {
            let created = state
                .streams
                .values()
                .filter(|s| s.device == target.device && s.flags & NON_BLOCKING == 0)
                .map(|s| &s.queue);
            let per_thread = state
                .builtin_queues
                .per_thread
                .iter()
                .filter(|((_, device), _)| *device == target.device)
                .map(|(_, queue)| queue);
            waits.extend(created.chain(per_thread).map(Queue::marker));
        }
    }
    for marker in waits.into_iter().filter(|m| !m.is_done()) {
        target.queue.submit(Box::new(move || marker.wait()))?;
    }
    target.queue.submit(job)
}

/// A marker for "everything queued on `target` so far", legacy ordering included: what
/// synchronizing the stream waits for.
pub(crate) fn fence(state: &mut State, target: &Target) -> Result<Marker, Fault> {
    submit(state, target, Box::new(|| {}))?;
    Ok(target.queue.marker())
}

/// Markers for all work queued anywhere in the library: what a device-wide synchronization
/// (`*Free`, `fake_reset`) waits for.
pub(crate) fn all_work(state: &State) -> Vec<Marker> {
    let builtin = &state.builtin_queues;
    state
        .streams
        .values()
        .map(|s| &s.queue)
        .chain(builtin.legacy.values())
        .chain(builtin.per_thread.values())
        .chain(builtin.retired.iter())
        .map(Queue::marker)
        .collect()
}

/// A stream or the device was synchronized: pools hand back what they keep beyond their release
/// thresholds, as the driver does at synchronization.
pub(crate) fn synchronized() {
    let mut state = crate::state::lock();
    let state = &mut *state;
    state.pools.synchronized(&mut state.devices);
}
