//! HIP's dialect: status codes, error names, sentinel streams, flags, versions.

use fake_driver::{Attributes, Codes, ErrorInfo, Platform};

pub(crate) static HIP: Platform = Platform {
    // The null stream and hipStreamPerThread; HIP has no legacy stream.
    builtin_streams: &[0, 2],
    // hipStreamNonBlocking.
    stream_flags: 0x1,
    // hipEventBlockingSync | hipEventDisableTiming | hipEventInterprocess |
    // hipEventDisableSystemFence | hipEventReleaseToDevice | hipEventReleaseToSystem.
    event_flags: 0x7 | 0x2000_0000 | 0x4000_0000 | 0x8000_0000,
    // hipStreamWaitEvent requires flags 0.
    wait_flags: 0,
    // hipHostMallocPortable | Mapped | WriteCombined | NumaUser | Coherent | NonCoherent.
    host_alloc_flags: 0x7 | 0x2000_0000 | 0x4000_0000 | 0x8000_0000,
    // hipMemAttachGlobal, hipMemAttachHost.
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
        row(0, c"hipSuccess", c"no error"),
        row(1, c"hipErrorInvalidValue", c"invalid argument"),
        row(2, c"hipErrorOutOfMemory", c"out of memory"),
        row(3, c"hipErrorNotInitialized", c"initialization error"),
        row(
            17,
            c"hipErrorInvalidDevicePointer",
            c"invalid device pointer",
        ),
        row(
            21,
            c"hipErrorInvalidMemcpyDirection",
            c"invalid copy direction for memcpy",
        ),
        row(
            35,
            c"hipErrorInsufficientDriver",
            c"driver version is insufficient for runtime version",
        ),
        row(
            100,
            c"hipErrorNoDevice",
            c"no ROCm-capable device is detected",
        ),
        row(101, c"hipErrorInvalidDevice", c"invalid device ordinal"),
        row(400, c"hipErrorInvalidHandle", c"invalid resource handle"),
        row(600, c"hipErrorNotReady", c"device not ready"),
        row(
            700,
            c"hipErrorIllegalAddress",
            c"an illegal memory access was encountered",
        ),
        row(801, c"hipErrorNotSupported", c"operation not supported"),
        row(
            900,
            c"hipErrorStreamCaptureUnsupported",
            c"operation not permitted when stream is capturing",
        ),
        row(
            901,
            c"hipErrorStreamCaptureInvalidated",
            c"operation failed due to a previous error during capture",
        ),
        row(
            902,
            c"hipErrorStreamCaptureMerge",
            c"operation would result in a merge of separate capture sequences",
        ),
        row(
            903,
            c"hipErrorStreamCaptureUnmatched",
            c"capture was not ended in the same stream as it began",
        ),
        row(
            904,
            c"hipErrorStreamCaptureUnjoined",
            c"capturing stream has unjoined work",
        ),
        row(
            905,
            c"hipErrorStreamCaptureIsolation",
            c"dependency created on uncaptured work in another stream",
        ),
        row(
            906,
            c"hipErrorStreamCaptureImplicit",
            c"operation would make the legacy stream depend on a capturing blocking stream",
        ),
        row(
            908,
            c"hipErrorStreamCaptureWrongThread",
            c"attempt to terminate a thread-local capture sequence from another thread",
        ),
        row(999, c"hipErrorUnknown", c"unknown error"),
    ],
    // HIP names every code it does not know hipErrorUnknown.
    unrecognized: row(999, c"hipErrorUnknown", c"unknown error"),
    // HIP 6.2.41133 (10000000 * major + 100000 * minor + patch).
    default_versions: (60_241_133, 60_241_133),
    // hipMemPoolCreate takes device locations only.
    host_pools_since: None,
    export_keeps_handle: true,
    set_device_activates: false,
    max_size_since: Some(60_200_000),
    high_water_marks_zeroed: true,
    attributes: Attributes {
        memory_pools_supported: 88,
        unified_addressing: 85,
        concurrent_managed_access: 9,
        compute_capability: None,
        host_pools_supported: None,
        host_numa_id: None,
        capability: (9, 0),
    },
    device_name: "Fake HIP GPU",
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
        let codes = HIP.codes;
        for (code, name) in [
            (codes.success, "hipSuccess"),
            (codes.invalid_value, "hipErrorInvalidValue"),
            (codes.out_of_memory, "hipErrorOutOfMemory"),
            (codes.no_device, "hipErrorNoDevice"),
            (codes.invalid_device, "hipErrorInvalidDevice"),
            (codes.invalid_handle, "hipErrorInvalidHandle"),
            (
                codes.invalid_memcpy_direction,
                "hipErrorInvalidMemcpyDirection",
            ),
            (codes.unknown, "hipErrorUnknown"),
            (codes.not_initialized, "hipErrorNotInitialized"),
        ] {
            assert_eq!(HIP.error_info(code).name.to_str(), Ok(name));
        }
    }
}
