//! HIP's stream handles and the DLPack `stream=` rules for ROCm.

use crate::stream::StreamSentinel;

/// `hipStreamPerThread`.
const PER_THREAD_DEFAULT: usize = 2;

/// HIP's null stream (0) is both the default and the legacy default stream.
pub(super) fn sentinel_handle(which: StreamSentinel) -> usize {
    match which {
        StreamSentinel::Default | StreamSentinel::LegacyDefault => 0,
        StreamSentinel::PerThreadDefault => PER_THREAD_DEFAULT,
    }
}

/// The value a DLPack consumer on the stream `handle` passes a producer:
/// the handle, but for the per-thread default stream, which the protocol
/// has no value for on ROCm (1 and 2 are reserved): 0, the null stream,
/// which the per-thread stream, a blocking stream, waits for, so the
/// producer's work still comes before the consumer's.
pub(crate) fn consumer_value(handle: usize) -> usize {
    if handle == PER_THREAD_DEFAULT {
        0
    } else {
        handle
    }
}

/// DLPack on ROCm: no value and 0 mean the default stream, -1 means no
/// synchronization, 1 and 2 are reserved, larger values are stream handles.
pub(super) fn consumer_handle(value: Option<i64>) -> Result<Option<usize>, String> {
    match value {
        None | Some(0) => Ok(Some(0)),
        Some(-1) => Ok(None),
        Some(v @ (1 | 2)) => Err(format!(
            "stream={v} is reserved for ROCm by the DLPack protocol; pass 0 for the default stream or a stream handle"
        )),
        Some(v) => usize::try_from(v)
            .map(Some)
            .map_err(|_| format!("stream={v} is not a ROCm stream; pass -1, 0 or a stream handle")),
    }
}
