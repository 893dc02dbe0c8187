//! PyTorch memory snapshots: the pickle `torch.cuda.memory._snapshot()`
//! returns, which `python -m torch.cuda._memory_viz` and the memory_viz
//! page read. devmm has no caching allocator, so each live allocation is a
//! segment of its own holding one active block; the trace becomes the
//! per-device `device_traces` (`alloc`, `free_requested`,
//! `free_completed`, `oom`).

use std::path::Path;

use super::pickle::{Value, dumps};
use super::{Action, TraceEvent};
use crate::callsite::Frame;
use crate::device::Device;

/// One allocation still live when the snapshot is taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveBlock {
    /// Its device.
    pub device: Option<Device>,
    /// Its address.
    pub ptr: usize,
    /// Bytes asked for.
    pub nbytes: usize,
    /// The stream it was allocated on.
    pub stream: usize,
    /// Where it was allocated, innermost first.
    pub frames: Vec<Frame>,
}

/// A snapshot in PyTorch's format, ready to pickle.
///
/// ```
/// use devmm::trace::{parse_trace, torch_snapshot_of_trace};
/// let csv = "Thread,Time,Action,Pointer,Size,Stream\n\
///            7,10:00:00.000001,allocate,0x1000,64,0\n";
/// let snapshot = torch_snapshot_of_trace(&parse_trace(csv, "t.csv")?);
/// assert_eq!(snapshot.segment_count(), 1);
/// assert_eq!(&snapshot.to_pickle()[..2], b"\x80\x02");
/// # Ok::<(), devmm::trace::TraceError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct TorchSnapshot {
    segments: usize,
    value: Value,
}

impl TorchSnapshot {
    /// A snapshot of `live` allocations and the history `events` (either may be empty).
    pub fn new(live: &[LiveBlock], events: &[TraceEvent]) -> TorchSnapshot {
        let segments = live.iter().map(segment).collect::<Vec<_>>();
        let mut traces: Vec<Vec<Value>> = Vec::new();
        for e in events {
            let index = device_index(e.device);
            if traces.len() <= index {
                traces.resize_with(index + 1, Vec::new);
            }
            let time_us = Value::int(i128::from(e.time_ns / 1_000));
            let entry = |action: &str| {
                Value::dict(vec![
                    ("action", Value::str(action)),
                    ("addr", Value::size(e.ptr)),
                    ("size", Value::size(e.nbytes)),
                    ("stream", Value::size(e.stream)),
                    ("time_us", time_us.clone()),
                    ("frames", frames(&e.frames)),
                ])
            };
            match e.action {
                Action::Allocate => traces[index].push(entry("alloc")),
                // devmm frees are complete when deallocate returns: the
                // request and its completion are one moment.
                Action::Free => {
                    traces[index].push(entry("free_requested"));
                    traces[index].push(entry("free_completed"));
                }
                Action::AllocateFailure => {
                    let mut oom = entry("oom");
                    if let Value::Dict(fields) = &mut oom {
                        fields.push(("device_free".into(), Value::int(0)));
                    }
                    traces[index].push(oom);
                }
            }
        }
        let value = Value::dict(vec![
            ("segments", Value::List(segments)),
            (
                "device_traces",
                Value::List(traces.into_iter().map(Value::List).collect()),
            ),
            (
                "allocator_settings",
                Value::dict(vec![("PYTORCH_CUDA_ALLOC_CONF", Value::str("devmm"))]),
            ),
        ]);
        TorchSnapshot {
            segments: live.len(),
            value,
        }
    }

    /// The number of segments (live allocations).
    pub fn segment_count(&self) -> usize {
        self.segments
    }

    /// The pickled snapshot.
    pub fn to_pickle(&self) -> Vec<u8> {
        dumps(&self.value)
    }

    /// Writes the pickled snapshot to `path`.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        std::fs::write(path, self.to_pickle())
    }
}

/// The snapshot at the end of a trace: what is still live, and the whole
/// history as device traces.
pub fn torch_snapshot_of_trace(events: &[TraceEvent]) -> TorchSnapshot {
    let mut live: Vec<LiveBlock> = Vec::new();
    for e in events {
        match e.action {
            Action::Allocate if e.nbytes > 0 => live.push(LiveBlock {
                device: e.device,
                ptr: e.ptr,
                nbytes: e.nbytes,
                stream: e.stream,
                frames: e.frames.clone(),
            }),
            Action::Free => {
                if let Some(i) = live
                    .iter()
                    .rposition(|b| b.ptr == e.ptr && b.device == e.device)
                {
                    live.swap_remove(i);
                }
            }
            _ => {}
        }
    }
    live.sort_by_key(|b| (device_index(b.device), b.ptr));
    TorchSnapshot::new(&live, events)
}

/// PyTorch numbers devices by ordinal alone.
fn device_index(device: Option<Device>) -> usize {
    device.map_or(0, |d| d.index() as usize)
}

fn frames(frames: &[Frame]) -> Value {
    Value::List(
        frames
            .iter()
            .map(|f| {
                Value::dict(vec![
                    (
                        "filename",
                        Value::str(f.file.clone().unwrap_or_else(|| "??".into())),
                    ),
                    ("line", Value::int(i128::from(f.line.unwrap_or(0)))),
                    ("name", Value::str(f.function.clone())),
                ])
            })
            .collect(),
    )
}

fn segment(b: &LiveBlock) -> Value {
    let block = Value::dict(vec![
        ("address", Value::size(b.ptr)),
        ("size", Value::size(b.nbytes)),
        ("requested_size", Value::size(b.nbytes)),
        ("state", Value::str("active_allocated")),
        ("frames", frames(&b.frames)),
    ]);
    Value::dict(vec![
        ("device", Value::size(device_index(b.device))),
        ("address", Value::size(b.ptr)),
        ("total_size", Value::size(b.nbytes)),
        ("allocated_size", Value::size(b.nbytes)),
        ("active_size", Value::size(b.nbytes)),
        ("requested_size", Value::size(b.nbytes)),
        ("stream", Value::size(b.stream)),
        ("segment_type", Value::str("large")),
        (
            "segment_pool_id",
            Value::Tuple(vec![Value::int(0), Value::int(0)]),
        ),
        ("is_expandable", Value::Bool(false)),
        ("frames", Value::List(Vec::new())),
        ("blocks", Value::List(vec![block])),
    ])
}
