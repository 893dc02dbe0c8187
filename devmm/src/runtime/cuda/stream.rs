//! CUDA's magic stream handles and the DLPack `stream=` rules for CUDA.

use crate::stream::StreamSentinel;

/// `cudaStreamLegacy`.
const LEGACY_DEFAULT: usize = 1;
/// `cudaStreamPerThread`.
const PER_THREAD_DEFAULT: usize = 2;

/// `DEFAULT` is the null stream (0); the other sentinels are CUDA's magic
/// handles.
pub(super) fn sentinel_handle(which: StreamSentinel) -> usize {
    match which {
        StreamSentinel::Default => 0,
        StreamSentinel::LegacyDefault => LEGACY_DEFAULT,
        StreamSentinel::PerThreadDefault => PER_THREAD_DEFAULT,
    }
}

/// DLPack on CUDA: no value means the legacy default stream, -1 means no
/// synchronization, 0 is disallowed (ambiguous), 1 and 2 are the legacy
/// and per-thread default streams, larger values are stream handles.
pub(super) fn consumer_handle(value: Option<i64>) -> Result<Option<usize>, String> {
    match value {
        None => Ok(Some(LEGACY_DEFAULT)),
        Some(-1) => Ok(None),
        Some(0) => Err(
            "stream=0 is disallowed for CUDA by the DLPack protocol (it is ambiguous); \
             pass 1 for the legacy default stream or 2 for the per-thread default stream"
                .into(),
        ),
        Some(v) => usize::try_from(v).map(Some).map_err(|_| {
            format!("stream={v} is not a CUDA stream; pass -1, 1, 2 or a stream handle")
        }),
    }
}
