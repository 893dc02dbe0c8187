//! The CUDA runtime's dialect: status codes, error names, sentinel streams, flags, versions.

use fake_driver::{Attributes, Codes, ErrorInfo, Platform};

pub(crate) static CUDA: Platform = Platform {
    // 0, cudaStreamLegacy, cudaStreamPerThread.
    builtin_streams: &[0, 1, 2],
    // cudaStreamNonBlocking.
    stream_flags: 0x1,
    // cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess.
    event_flags: 0x7,
    // cudaEventWaitExternal.
    wait_flags: 0x1,
    // cudaMallocHost takes no flags.
    host_alloc_flags: 0,
    // cudaMemAttachGlobal, cudaMemAttachHost.
    managed_flags: &[1, 2],
    codes: Codes {
        success: 0,
        invalid_value: 1,
        out_of_memory: 2,
        no_device: 100,
        invalid_device: 101,
        invalid_handle: 400,
        invalid_memcpy_direction: 21,
        unknown: 999,
        not_supported: 801,
        insufficient_driver: 35,
        not_initialized: 3,
    },
    errors: &[
        row(0, c"cudaSuccess", c"no error"),
        row(1, c"cudaErrorInvalidValue", c"invalid argument"),
        row(2, c"cudaErrorMemoryAllocation", c"out of memory"),
        row(3, c"cudaErrorInitializationError", c"initialization error"),
        row(
            17,
            c"cudaErrorInvalidDevicePointer",
            c"invalid device pointer",
        ),
        row(
            21,
            c"cudaErrorInvalidMemcpyDirection",
            c"invalid copy direction for memcpy",
        ),
        row(
            35,
            c"cudaErrorInsufficientDriver",
            c"CUDA driver version is insufficient for CUDA runtime version",
        ),
        row(
            100,
            c"cudaErrorNoDevice",
            c"no CUDA-capable device is detected",
        ),
        row(101, c"cudaErrorInvalidDevice", c"invalid device ordinal"),
        row(
            400,
            c"cudaErrorInvalidResourceHandle",
            c"invalid resource handle",
        ),
        row(600, c"cudaErrorNotReady", c"device not ready"),
        row(
            700,
            c"cudaErrorIllegalAddress",
            c"an illegal memory access was encountered",
        ),
        row(801, c"cudaErrorNotSupported", c"operation not supported"),
        row(
            900,
            c"cudaErrorStreamCaptureUnsupported",
            c"operation not permitted when stream is capturing",
        ),
        row(
            901,
            c"cudaErrorStreamCaptureInvalidated",
            c"operation failed due to a previous error during capture",
        ),
        row(
            902,
            c"cudaErrorStreamCaptureMerge",
            c"operation would result in a merge of separate capture sequences",
        ),
        row(
            903,
            c"cudaErrorStreamCaptureUnmatched",
            c"capture was not ended in the same stream as it began",
        ),
        row(
            904,
            c"cudaErrorStreamCaptureUnjoined",
            c"capturing stream has unjoined work",
        ),
        row(
            905,
            c"cudaErrorStreamCaptureIsolation",
            c"dependency created on uncaptured work in another stream",
        ),
        row(
            906,
            c"cudaErrorStreamCaptureImplicit",
            c"operation would make the legacy stream depend on a capturing blocking stream",
        ),
        row(
            908,
            c"cudaErrorStreamCaptureWrongThread",
            c"attempt to terminate a thread-local capture sequence from another thread",
        ),
        row(999, c"cudaErrorUnknown", c"unknown error"),
    ],
    // What the real runtime answers for a code it does not know.
    unrecognized: row(-1, c"unrecognized error code", c"unrecognized error code"),
    // CUDA 12.4 (1000 * major + 10 * minor).
    default_versions: (12040, 12040),
    // CUDA 12.2: cudaMemPoolCreate takes a host NUMA node as the location.
    host_pools_since: Some(12020),
    export_keeps_handle: false,
    set_device_activates: true,
    max_size_since: None,
    high_water_marks_zeroed: false,
    attributes: Attributes {
        memory_pools_supported: 115,
        unified_addressing: 41,
        concurrent_managed_access: 89,
        compute_capability: Some((75, 76)),
        host_pools_supported: Some((142, 144)),
        host_numa_id: Some(134),
        capability: (9, 0),
    },
    device_name: "Fake CUDA GPU",
};

const fn row(
    code: i32,
    name: &'static std::ffi::CStr,
    description: &'static std::ffi::CStr,
) -> ErrorInfo {
    ErrorInfo {
        code,
        name,
        description,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_the_fake_returns_has_its_real_name() {
        let codes = CUDA.codes;
        for (code, name) in [
            (codes.success, "cudaSuccess"),
            (codes.invalid_value, "cudaErrorInvalidValue"),
            (codes.out_of_memory, "cudaErrorMemoryAllocation"),
            (codes.no_device, "cudaErrorNoDevice"),
            (codes.invalid_device, "cudaErrorInvalidDevice"),
            (codes.invalid_handle, "cudaErrorInvalidResourceHandle"),
            (
                codes.invalid_memcpy_direction,
                "cudaErrorInvalidMemcpyDirection",
            ),
            (codes.unknown, "cudaErrorUnknown"),
            (codes.not_initialized, "cudaErrorInitializationError"),
        ] {
            assert_eq!(CUDA.error_info(code).name.to_str(), Ok(name));
        }
    }
}
