//! The fake driver libraries build from a fresh checkout, load with libloading, and behave as
//! the runtime tests need: real status codes, per-device limits, live handles, an ordered call
//! log, failure injection, and the reduced variants for the loader's missing-symbol paths.

mod support;

use std::ffi::{CStr, c_char, c_int, c_void};
use std::ptr;

use support::fake_driver::{FakeControl, exclusive, fake_libraries};
use support::fork::in_forked_child;

type Handle = *mut c_void;
type GetInt = unsafe extern "C" fn(*mut c_int) -> c_int;
type SetInt = extern "C" fn(c_int) -> c_int;
type MemGetInfo = unsafe extern "C" fn(*mut usize, *mut usize) -> c_int;
type Malloc = unsafe extern "C" fn(*mut Handle, usize) -> c_int;
type MallocFlags = unsafe extern "C" fn(*mut Handle, usize, u32) -> c_int;
type MallocAsync = unsafe extern "C" fn(*mut Handle, usize, Handle) -> c_int;
type Free = extern "C" fn(Handle) -> c_int;
type FreeAsync = extern "C" fn(Handle, Handle) -> c_int;
type Memcpy = unsafe extern "C" fn(Handle, *const c_void, usize, c_int) -> c_int;
type MemcpyAsync = unsafe extern "C" fn(Handle, *const c_void, usize, c_int, Handle) -> c_int;
type Create = unsafe extern "C" fn(*mut Handle, u32) -> c_int;
type OnHandle = extern "C" fn(Handle) -> c_int;
type WaitEvent = extern "C" fn(Handle, Handle, u32) -> c_int;
type Record = extern "C" fn(Handle, Handle) -> c_int;
type ErrorText = extern "C" fn(c_int) -> *const c_char;

/// `cudaMemcpyKind` / `hipMemcpyKind`.
const HOST_TO_HOST: c_int = 0;
const HOST_TO_DEVICE: c_int = 1;
const DEVICE_TO_HOST: c_int = 2;
const DEFAULT: c_int = 4;

/// The platform functions under test, resolved from one fake library.
struct Api {
    get_device_count: GetInt,
    get_device: GetInt,
    set_device: SetInt,
    mem_get_info: MemGetInfo,
    malloc: Malloc,
    malloc_async: MallocAsync,
    free: Free,
    free_async: FreeAsync,
    memcpy: Memcpy,
    memcpy_async: MemcpyAsync,
    stream_create: Create,
    stream_destroy: OnHandle,
    stream_synchronize: OnHandle,
    stream_wait_event: WaitEvent,
    event_create: Create,
    event_record: Record,
    event_destroy: OnHandle,
    error_name: ErrorText,
    error_string: ErrorText,
    runtime_version: GetInt,
    driver_version: GetInt,
}

impl Api {
    /// `prefix` is `cuda` or `hip`; every name below exists in both APIs.
    fn resolve(fake: &FakeControl, prefix: &str) -> Self {
        let name = |suffix: &str| format!("{prefix}{suffix}");
        // SAFETY: each type alias above is the C signature of the symbol it is resolved for.
        unsafe {
            Self {
                get_device_count: fake.function(&name("GetDeviceCount")),
                get_device: fake.function(&name("GetDevice")),
                set_device: fake.function(&name("SetDevice")),
                mem_get_info: fake.function(&name("MemGetInfo")),
                malloc: fake.function(&name("Malloc")),
                malloc_async: fake.function(&name("MallocAsync")),
                free: fake.function(&name("Free")),
                free_async: fake.function(&name("FreeAsync")),
                memcpy: fake.function(&name("Memcpy")),
                memcpy_async: fake.function(&name("MemcpyAsync")),
                stream_create: fake.function(&name("StreamCreateWithFlags")),
                stream_destroy: fake.function(&name("StreamDestroy")),
                stream_synchronize: fake.function(&name("StreamSynchronize")),
                stream_wait_event: fake.function(&name("StreamWaitEvent")),
                event_create: fake.function(&name("EventCreateWithFlags")),
                event_record: fake.function(&name("EventRecord")),
                event_destroy: fake.function(&name("EventDestroy")),
                error_name: fake.function(&name("GetErrorName")),
                error_string: fake.function(&name("GetErrorString")),
                runtime_version: fake.function(&name("RuntimeGetVersion")),
                driver_version: fake.function(&name("DriverGetVersion")),
            }
        }
    }

    fn int(&self, get: GetInt) -> (c_int, c_int) {
        let mut value = -1;
        // SAFETY: `value` is valid for a write.
        let status = unsafe { get(&mut value) };
        (status, value)
    }

    fn mem_info(&self) -> (c_int, usize, usize) {
        let (mut free, mut total) = (0, 0);
        // SAFETY: both are valid for writes.
        let status = unsafe { (self.mem_get_info)(&mut free, &mut total) };
        (status, free, total)
    }

    fn alloc(&self, size: usize) -> (c_int, Handle) {
        let mut ptr = ptr::null_mut();
        // SAFETY: `ptr` is valid for a write.
        let status = unsafe { (self.malloc)(&mut ptr, size) };
        (status, ptr)
    }

    fn create(&self, create: Create, flags: u32) -> (c_int, Handle) {
        let mut handle = ptr::null_mut();
        // SAFETY: `handle` is valid for a write.
        let status = unsafe { create(&mut handle, flags) };
        (status, handle)
    }

    fn text(&self, get: ErrorText, code: c_int) -> String {
        // SAFETY: the error functions return static NUL-terminated strings.
        unsafe { CStr::from_ptr(get(code)) }
            .to_string_lossy()
            .into_owned()
    }
}

fn handle(value: usize) -> Handle {
    ptr::without_provenance_mut(value)
}

#[test]
fn devices_memory_limits_and_copies() {
    let _serial = exclusive();
    let fake = FakeControl::open(&fake_libraries().cudart);
    fake.reset();
    let cuda = Api::resolve(fake, "cuda");

    assert_eq!(cuda.int(cuda.get_device_count), (0, 2));
    assert_eq!(fake.set_device_count(3), 0);
    assert_eq!(cuda.int(cuda.get_device_count), (0, 3));
    assert_eq!(fake.set_device_count(-1), -1);
    assert_eq!(fake.set_device_count(65), -1);
    assert_eq!(fake.set_device_count(0), 0);
    assert_eq!(
        cuda.int(cuda.get_device_count),
        (100, 0),
        "cudaErrorNoDevice"
    );
    assert_eq!(fake.set_device_count(2), 0);

    assert_eq!(fake.set_memory_limit(0, 4096), 0);
    assert_eq!(
        fake.set_memory_limit(2, 4096),
        -1,
        "device 2 does not exist"
    );
    assert_eq!(cuda.mem_info(), (0, 4096, 4096));
    let (status, block) = cuda.alloc(1000);
    assert_eq!(status, 0);
    assert!(!block.is_null());
    assert_eq!(block as usize % 256, 0);
    assert_eq!(cuda.mem_info(), (0, 3096, 4096));
    assert_eq!(
        cuda.alloc(3097).0,
        2,
        "cudaErrorMemoryAllocation past the limit"
    );
    assert_eq!(cuda.alloc(0), (0, ptr::null_mut()));
    assert_eq!(fake.live_allocations(), 1);

    assert_eq!((cuda.set_device)(1), 0);
    assert_eq!(cuda.int(cuda.get_device), (0, 1));
    assert_eq!(
        cuda.mem_info(),
        (0, 1 << 30, 1 << 30),
        "device 1 keeps the default limit"
    );
    assert_eq!((cuda.set_device)(2), 101, "cudaErrorInvalidDevice");
    assert_eq!(cuda.int(cuda.get_device), (0, 1));
    let elsewhere = std::thread::spawn(move || {
        let mut device = -1;
        // SAFETY: `device` is valid for a write.
        let status = unsafe { (cuda.get_device)(&mut device) };
        (status, device)
    });
    assert_eq!(
        elsewhere.join().unwrap(),
        (0, 0),
        "the current device is per thread"
    );

    let input: Vec<u8> = (0..=255).cycle().take(1000).collect();
    let mut output = vec![0u8; 1000];
    // SAFETY: host buffers hold 1000 bytes; `block` is a 1000-byte device block.
    unsafe {
        assert_eq!(
            (cuda.memcpy)(block, input.as_ptr().cast(), 1000, HOST_TO_DEVICE),
            0
        );
        assert_eq!(
            (cuda.memcpy)(output.as_mut_ptr().cast(), block, 1000, DEVICE_TO_HOST),
            0
        );
        assert_eq!(
            (cuda.memcpy)(block, input.as_ptr().cast(), 1001, HOST_TO_DEVICE),
            1,
            "past the block"
        );
        assert_eq!(
            (cuda.memcpy)(block, input.as_ptr().cast(), 10, 9),
            21,
            "bad cudaMemcpyKind"
        );
    }
    assert_eq!(input, output);
    // The kind must match the memory: a host side is never device memory and a device side
    // always is; the default kind reads each side's memory itself, with unified addressing.
    let mut host = vec![0u8; 16];
    // SAFETY: `host` and `input` hold at least 16 bytes; `block` is a 1000-byte device block.
    unsafe {
        let to_host = host.as_mut_ptr().cast();
        let wrong = [
            (
                (to_host, input.as_ptr().cast()),
                HOST_TO_DEVICE,
                "a host dst",
            ),
            ((block, input.as_ptr().cast()), HOST_TO_HOST, "a device dst"),
            ((to_host, block.cast_const()), HOST_TO_HOST, "a device src"),
            (
                (to_host, input.as_ptr().cast()),
                DEVICE_TO_HOST,
                "a host src",
            ),
        ];
        for ((dst, src), kind, what) in wrong {
            assert_eq!((cuda.memcpy)(dst, src, 16, kind), 1, "{what}, kind {kind}");
        }
        assert_eq!((cuda.memcpy)(to_host, block, 16, DEFAULT), 0);
        assert_eq!(host, input[..16]);
        assert_eq!(fake.set_unified_addressing(1, false), 0);
        assert_eq!(
            (cuda.memcpy)(to_host, block, 16, DEFAULT),
            21,
            "the default kind needs unified addressing"
        );
        assert_eq!(fake.set_unified_addressing(1, true), 0);
    }

    assert_eq!(
        (cuda.free)(block),
        400,
        "device memory is freed with its device current"
    );
    assert_eq!((cuda.set_device)(0), 0);
    assert_eq!((cuda.free)(block), 0);
    assert_eq!((cuda.free)(block), 1, "double free: cudaErrorInvalidValue");
    assert_eq!((cuda.free)(ptr::null_mut()), 0);
    assert_eq!(fake.live_allocations(), 0);
    assert_eq!(cuda.mem_info(), (0, 4096, 4096));

    let (_, leaked) = cuda.alloc(64);
    assert!(!leaked.is_null());
    fake.reset();
    assert_eq!(fake.live_allocations(), 0, "reset frees every block");
    assert_eq!(
        cuda.mem_info(),
        (0, 1 << 30, 1 << 30),
        "and restores the default limit"
    );
}

#[test]
fn streams_events_and_the_call_log() {
    let _serial = exclusive();
    let fake = FakeControl::open(&fake_libraries().cudart);
    fake.reset();
    // Dead handles are checked here as errors, not as the strict mode's abort.
    fake.set_strict(false);
    let cuda = Api::resolve(fake, "cuda");

    let (status, producer) = cuda.create(cuda.stream_create, 0);
    assert_eq!(status, 0);
    let (status, consumer) = cuda.create(cuda.stream_create, 1);
    assert_eq!(status, 0);
    for stream in [producer, consumer] {
        assert!(
            stream as usize > 2,
            "created streams never look like sentinels"
        );
    }
    assert_ne!(producer, consumer);
    assert_eq!(
        cuda.create(cuda.stream_create, 4).0,
        1,
        "unknown stream flag"
    );
    for sentinel in [0, 1, 2] {
        assert_eq!((cuda.stream_synchronize)(handle(sentinel)), 0);
    }
    assert_eq!(
        (cuda.stream_destroy)(handle(1)),
        400,
        "sentinels cannot be destroyed"
    );

    let (status, event) = cuda.create(cuda.event_create, 2);
    assert_eq!(status, 0);
    assert_ne!(event, producer);
    fake.clear_calls();
    assert_eq!((cuda.event_record)(event, producer), 0);
    assert_eq!((cuda.stream_wait_event)(consumer, event, 0), 0);
    let log = fake.call_log();
    assert_eq!(
        log,
        [
            format!("cudaEventRecord event={event:p} stream={producer:p} -> 0"),
            format!(
                "cudaStreamWaitEvent stream={consumer:p} event={event:p} flags=0 recorded_on={producer:p} -> 0"
            ),
        ]
    );

    // Stream-ordered allocation charges the stream's device, which must be the current one.
    assert_eq!((cuda.set_device)(1), 0);
    let (_, on_device_1) = cuda.create(cuda.stream_create, 0);
    assert_eq!((cuda.set_device)(0), 0);
    let mut block = ptr::null_mut();
    // SAFETY: `block` is valid for a write.
    let status = unsafe { (cuda.malloc_async)(&mut block, 512, on_device_1) };
    assert_eq!(
        status, 400,
        "a stream of another device than the current one"
    );
    assert_eq!((cuda.set_device)(1), 0);
    // SAFETY: `block` is valid for a write.
    let status = unsafe { (cuda.malloc_async)(&mut block, 512, on_device_1) };
    assert_eq!(status, 0);
    assert_eq!((cuda.set_device)(0), 0);
    assert_eq!(cuda.mem_info().1, 1 << 30, "device 0 is not charged");
    assert_eq!((cuda.set_device)(1), 0);
    let byte = 7u8;
    // SAFETY: one host byte into a 512-byte device block.
    let status = unsafe {
        (cuda.memcpy_async)(
            block,
            ptr::from_ref(&byte).cast(),
            1,
            HOST_TO_DEVICE,
            on_device_1,
        )
    };
    assert_eq!(status, 0);
    assert_eq!((cuda.set_device)(1), 0);
    assert_eq!(cuda.mem_info().1, (1 << 30) - 512, "device 1 is");
    assert_eq!((cuda.free_async)(block, on_device_1), 0);
    assert_eq!(fake.live_allocations(), 0);

    // An event and the stream it is recorded on must share a device.
    assert_eq!((cuda.event_record)(event, on_device_1), 400);
    assert_eq!((cuda.stream_destroy)(on_device_1), 0);
    assert_eq!((cuda.set_device)(0), 0);

    assert_eq!((cuda.stream_destroy)(producer), 0);
    assert_eq!(
        (cuda.stream_destroy)(producer),
        400,
        "a destroyed stream is invalid"
    );
    assert_eq!((cuda.stream_synchronize)(producer), 400);
    assert_eq!((cuda.event_record)(event, producer), 400);
    assert_eq!(
        (cuda.stream_wait_event)(consumer, producer, 0),
        400,
        "a stream is not an event"
    );
    assert_eq!((cuda.event_destroy)(event), 0);
    assert_eq!((cuda.event_destroy)(event), 400);
    fake.reset();
    fake.set_strict(false);
    assert_eq!(
        (cuda.stream_synchronize)(consumer),
        400,
        "reset destroys every stream"
    );
}

#[test]
fn counters_injected_failures_versions_and_error_names() {
    let _serial = exclusive();
    let fake = FakeControl::open(&fake_libraries().cudart);
    fake.reset();
    let cuda = Api::resolve(fake, "cuda");

    assert_eq!(fake.fail_next("cudaMalloc", 2), 0);
    assert_eq!(fake.fail_next("cudaMalloc", 999), 0);
    assert_eq!(cuda.alloc(64).0, 2);
    assert_eq!(
        cuda.alloc(64).0,
        999,
        "a second failure queued behind the first"
    );
    assert_eq!(fake.live_allocations(), 0, "failed calls allocate nothing");
    let (status, block) = cuda.alloc(64);
    assert_eq!(status, 0);
    assert_eq!((cuda.free)(block), 0);
    assert_eq!(fake.fail_nth("cudaStreamSynchronize", 2, 700), 0);
    assert_eq!((cuda.stream_synchronize)(handle(0)), 0);
    assert_eq!((cuda.stream_synchronize)(handle(0)), 700);
    assert_eq!((cuda.stream_synchronize)(handle(0)), 0);
    assert_eq!(fake.fail_nth("cudaMalloc", 0, 2), -1);

    assert_eq!(fake.call_count("cudaMalloc"), 3);
    assert_eq!(fake.call_count("cudaFree"), 1);
    assert_eq!(fake.call_count("cudaStreamSynchronize"), 3);
    assert_eq!(fake.call_count("cudaMallocHost"), 0);
    let log = fake.call_log();
    assert_eq!(log.len(), 7);
    assert_eq!(
        log[0], "cudaMalloc size=64 -> 2",
        "injected: inputs logged, body skipped"
    );
    assert!(
        log[2].starts_with("cudaMalloc size=64 device=0 ptr=0x"),
        "{}",
        log[2]
    );
    assert!(log[2].ends_with(" -> 0"));
    assert_eq!(log[5], "cudaStreamSynchronize stream=0x0 -> 700");
    fake.clear_calls();
    assert_eq!(fake.call_count("cudaMalloc"), 0);
    assert!(fake.call_log().is_empty());

    assert_eq!(cuda.int(cuda.runtime_version), (0, 12040));
    fake.set_version(11080, 12020);
    assert_eq!(cuda.int(cuda.runtime_version), (0, 11080));
    assert_eq!(cuda.int(cuda.driver_version), (0, 12020));

    assert_eq!(cuda.text(cuda.error_name, 2), "cudaErrorMemoryAllocation");
    assert_eq!(
        cuda.text(cuda.error_name, 400),
        "cudaErrorInvalidResourceHandle"
    );
    assert_eq!(cuda.text(cuda.error_string, 101), "invalid device ordinal");
    assert_eq!(cuda.text(cuda.error_name, 12345), "unrecognized error code");
    assert_eq!(fake.call_count("cudaGetErrorName"), 3);
}

#[test]
fn hip_has_its_own_codes_sentinels_and_state() {
    let _serial = exclusive();
    let libraries = fake_libraries();
    let cuda_fake = FakeControl::open(&libraries.cudart);
    let fake = FakeControl::open(&libraries.hip);
    cuda_fake.reset();
    fake.reset();
    // Dead handles are checked here as errors, not as the strict mode's abort.
    fake.set_strict(false);
    let hip = Api::resolve(fake, "hip");

    assert_eq!(fake.set_memory_limit(1, 100), 0);
    assert_eq!((hip.set_device)(1), 0);
    assert_eq!(hip.alloc(101).0, 2, "hipErrorOutOfMemory");
    assert_eq!(hip.text(hip.error_name, 2), "hipErrorOutOfMemory");
    assert_eq!(hip.text(hip.error_name, 400), "hipErrorInvalidHandle");
    assert_eq!(hip.text(hip.error_name, 12345), "hipErrorUnknown");
    assert_eq!((hip.stream_synchronize)(handle(0)), 0);
    assert_eq!((hip.stream_synchronize)(handle(2)), 0, "hipStreamPerThread");
    assert_eq!(
        (hip.stream_synchronize)(handle(1)),
        400,
        "HIP has no legacy stream"
    );
    assert_eq!(hip.int(hip.runtime_version), (0, 60_241_133));

    let (status, device_block) = hip.alloc(100);
    assert_eq!(status, 0);
    // SAFETY: the type is `hipHostMalloc`'s C signature.
    let host_malloc: MallocFlags = unsafe { fake.function("hipHostMalloc") };
    // SAFETY: as above, for `hipHostFree`.
    let host_free: Free = unsafe { fake.function("hipHostFree") };
    let mut pinned = ptr::null_mut();
    // SAFETY: `pinned` is valid for a write.
    assert_eq!(unsafe { host_malloc(&mut pinned, 1 << 20, 0x2) }, 0);
    assert_eq!(pinned as usize % 4096, 0);
    assert_eq!(
        hip.mem_info(),
        (0, 0, 100),
        "pinned memory is charged to no device"
    );
    assert_eq!((hip.free)(pinned), 1, "hipFree refuses pinned memory");
    assert_eq!(
        host_free(device_block),
        1,
        "hipHostFree refuses device memory"
    );
    assert_eq!(fake.live_allocations(), 2);
    assert_eq!(
        cuda_fake.live_allocations(),
        0,
        "each fake has its own state"
    );
    assert_eq!(cuda_fake.call_count("hipMalloc"), 0);
    assert_eq!(host_free(pinned), 0);
    assert_eq!((hip.free)(device_block), 0);
    assert_eq!(fake.live_allocations(), 0);
}

#[test]
fn concurrent_calls_are_serialised() {
    let _serial = exclusive();
    let fake = FakeControl::open(&fake_libraries().cudart);
    fake.reset();
    let cuda = Api::resolve(fake, "cuda");
    let workers: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                for _ in 0..50 {
                    let mut block = ptr::null_mut();
                    // SAFETY: `block` is valid for a write.
                    assert_eq!(unsafe { (cuda.malloc)(&mut block, 256) }, 0);
                    assert_eq!((cuda.free)(block), 0);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    assert_eq!(fake.call_count("cudaMalloc"), 200);
    assert_eq!(fake.live_allocations(), 0);
    assert_eq!(cuda.mem_info().1, 1 << 30, "every byte given back");
}

#[test]
fn variants_leave_out_the_documented_symbols() {
    let libraries = fake_libraries();
    let exports = |path: &std::path::Path, name: &str| {
        // SAFETY: only the symbol's presence is checked; it is never called.
        unsafe { FakeControl::open(path).library().get::<*const c_void>(name) }.is_ok()
    };
    assert!(exports(&libraries.cudart, "cudaMallocAsync"));
    assert!(exports(&libraries.cudart_sync, "cudaMalloc"));
    assert!(exports(&libraries.cudart_sync, "cudaMemcpyAsync"));
    assert!(!exports(&libraries.cudart_sync, "cudaMallocAsync"));
    assert!(!exports(&libraries.cudart_sync, "cudaFreeAsync"));
    assert!(exports(&libraries.cudart_minimal, "cudaGetDeviceCount"));
    assert!(exports(&libraries.cudart_minimal, "cudaGetErrorString"));
    assert!(exports(&libraries.cudart_minimal, "fake_reset"));
    assert!(!exports(&libraries.cudart_minimal, "cudaMalloc"));
    assert!(!exports(
        &libraries.cudart_minimal,
        "cudaStreamCreateWithFlags"
    ));
    assert!(exports(&libraries.hip, "hipMallocAsync"));
    assert!(!exports(&libraries.hip_sync, "hipMallocAsync"));
    assert!(exports(&libraries.hip_sync, "hipHostMalloc"));
}

/// Set in the child process `strict_mode_aborts_on_a_dead_handle` starts.
const STRICT_CHILD: &str = "DEVMM_TEST_STRICT_CHILD";

#[test]
fn strict_mode_aborts_on_a_dead_handle() {
    if std::env::var_os(STRICT_CHILD).is_some() {
        // The child: synchronize a stream that was destroyed, as a use-after-destroy would.
        let fake = FakeControl::open(&fake_libraries().cudart);
        fake.reset();
        let cuda = Api::resolve(fake, "cuda");
        let (status, stream) = cuda.create(cuda.stream_create, 0);
        assert_eq!(status, 0);
        assert_eq!((cuda.stream_destroy)(stream), 0);
        (cuda.stream_synchronize)(stream);
        unreachable!("the strict fake returned from a dead handle");
    }
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "strict_mode_aborts_on_a_dead_handle",
            "--nocapture",
        ])
        .env(STRICT_CHILD, "1")
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(output.status.signal(), Some(libc::SIGABRT), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cudaStreamSynchronize stream=0x")
            && stderr.contains("never created or was destroyed"),
        "{stderr}"
    );
}

/// Resets the fake when dropped, which releases held work and waits for every stream's work.
struct Drain(&'static FakeControl);

impl Drop for Drain {
    fn drop(&mut self) {
        self.0.reset();
    }
}

impl Api {
    /// Queues a device-to-host copy of `out.len()` bytes on `stream`.
    fn to_host(&self, out: &mut [u8], block: Handle, stream: Handle) -> c_int {
        // SAFETY: `out` is a live host buffer of `out.len()` bytes that outlives the work (every
        // caller synchronizes before reading or dropping it); `block` is at least that large.
        unsafe {
            (self.memcpy_async)(
                out.as_mut_ptr().cast(),
                block,
                out.len(),
                DEVICE_TO_HOST,
                stream,
            )
        }
    }
}

#[test]
fn stream_work_runs_later_in_order_and_legacy_and_per_thread_streams_order_like_hardware() {
    let _serial = exclusive();
    let fake = FakeControl::open(&fake_libraries().cudart);
    fake.reset();
    let cuda = Api::resolve(fake, "cuda");
    let (_, block) = cuda.alloc(64);
    let data: Vec<u8> = (1..=64).collect();
    // Host buffers the streams write into are declared before this guard, so even a failing
    // assertion lets the queued work finish (a reset drains every stream) before they drop.
    let mut out = vec![0u8; 64];
    let mut blocking_out = vec![0u8; 64];
    let mut non_blocking_out = vec![0u8; 64];
    let mut theirs = vec![0u8; 64];
    let _drain = Drain(fake);
    assert_eq!(
        // SAFETY: 64 host bytes into a 64-byte block; synchronous.
        unsafe { (cuda.memcpy)(block, data.as_ptr().cast(), 64, HOST_TO_DEVICE) },
        0
    );

    // A created stream: queued work has not run when the call returns (held, it cannot have);
    // synchronize waits for it.
    let (_, stream) = cuda.create(cuda.stream_create, 0);
    fake.hold_work(true);
    assert_eq!(cuda.to_host(&mut out, block, stream), 0);
    fake.hold_work(false);
    assert!(out.iter().all(|&b| b == 0), "the copy ran at call time");
    fake.release_work();
    assert_eq!((cuda.stream_synchronize)(stream), 0);
    assert_eq!(out, data);

    // The legacy stream waits for the blocking streams' work, not for a non-blocking one's:
    // the non-blocking copy is held, so a legacy synchronization that waited for it would hang.
    let (_, non_blocking) = cuda.create(cuda.stream_create, 0x1);
    fake.hold_work(true);
    assert_eq!(cuda.to_host(&mut non_blocking_out, block, non_blocking), 0);
    fake.hold_work(false);
    assert_eq!(cuda.to_host(&mut blocking_out, block, stream), 0);
    assert_eq!((cuda.stream_synchronize)(handle(0)), 0);
    assert_eq!(
        blocking_out, data,
        "legacy synchronization covers blocking streams"
    );
    assert!(
        non_blocking_out.iter().all(|&b| b == 0),
        "a non-blocking stream is not ordered with the legacy stream"
    );
    fake.release_work();
    assert_eq!((cuda.stream_synchronize)(non_blocking), 0);
    assert_eq!(non_blocking_out, data);

    // The per-thread stream is the calling thread's own: the other thread's copy is held, so
    // synchronizing this thread's per-thread stream would hang if it waited for it.
    let theirs_addr = theirs.as_mut_ptr() as usize;
    let block_addr = block as usize;
    let (queued_tx, queued_rx) = std::sync::mpsc::channel();
    let (synced_tx, synced_rx) = std::sync::mpsc::channel::<()>();
    let other = std::thread::spawn(move || {
        fake.hold_work(true);
        // SAFETY: `theirs` (64 bytes) outlives this thread's work: it synchronizes below, and
        // the drain guard waits for it on failure.
        let status = unsafe {
            (cuda.memcpy_async)(
                std::ptr::with_exposed_provenance_mut(theirs_addr),
                std::ptr::with_exposed_provenance(block_addr),
                64,
                DEVICE_TO_HOST,
                handle(2),
            )
        };
        fake.hold_work(false);
        queued_tx.send(status).unwrap();
        synced_rx.recv().unwrap();
        (cuda.stream_synchronize)(handle(2))
    });
    assert_eq!(queued_rx.recv().unwrap(), 0);
    assert_eq!((cuda.stream_synchronize)(handle(2)), 0, "this thread's own");
    assert!(
        theirs.iter().all(|&b| b == 0),
        "another thread's per-thread stream was waited for"
    );
    fake.release_work();
    synced_tx.send(()).unwrap();
    assert_eq!(other.join().unwrap(), 0);
    assert_eq!(theirs, data);

    // A stream-ordered free poisons the memory when the stream reaches it.
    let mut ordered = ptr::null_mut();
    // SAFETY: `ordered` is valid for a write.
    assert_eq!(unsafe { (cuda.malloc_async)(&mut ordered, 64, stream) }, 0);
    assert_eq!((cuda.free_async)(ordered, stream), 0);
    assert_eq!((cuda.stream_synchronize)(stream), 0);
    // SAFETY: freed fake memory stays mapped (poisoned) until the next reset.
    let freed = unsafe { std::slice::from_raw_parts(ordered.cast::<u8>(), 64) };
    assert!(freed.iter().all(|&b| b == 0xDB), "{freed:?}");

    assert_eq!((cuda.stream_destroy)(non_blocking), 0);
    assert_eq!((cuda.stream_destroy)(stream), 0);
    assert_eq!((cuda.free)(block), 0);
}

/// The runtime belongs to the process that initialised it (a GPU runtime's
/// state and threads are not copied by fork(); the CUDA guidelines make any
/// use in a forked child undefined): in a child forked after the first
/// call, every call fails with the initialisation error and touches
/// nothing, and the parent keeps working.
#[test]
fn a_child_forked_after_the_first_call_gets_the_initialisation_error() {
    let _serial = exclusive();
    let libraries = fake_libraries();
    for (library, prefix, error) in [
        (&libraries.cudart, "cuda", "cudaErrorInitializationError"),
        (&libraries.hip, "hip", "hipErrorNotInitialized"),
    ] {
        let fake = FakeControl::open(library);
        fake.reset();
        let api = Api::resolve(fake, prefix);
        let mut ptr: Handle = ptr::null_mut();
        // SAFETY: `ptr` is valid for a write.
        assert_eq!(unsafe { (api.malloc)(&mut ptr, 64) }, 0);
        let parent_ptr = ptr as usize;
        let child = in_forked_child(|| {
            let mut count = -1;
            // SAFETY: `count` is valid for a write.
            assert_eq!(unsafe { (api.get_device_count)(&mut count) }, 3, "{prefix}");
            assert_eq!(
                (api.free)(handle(parent_ptr)),
                3,
                "{prefix}: the parent's memory is not the child's to free"
            );
            // SAFETY: the error-name functions return a static C string.
            let name = unsafe { CStr::from_ptr((api.error_name)(3)) };
            assert_eq!(name.to_str(), Ok(error));
            assert_eq!(fake.live_allocations(), 1, "{prefix}: nothing was freed");
        });
        assert_eq!(child, Ok(()), "{prefix}");
        let mut count = -1;
        // SAFETY: `count` is valid for a write.
        assert_eq!(unsafe { (api.get_device_count)(&mut count) }, 0);
        assert_eq!(count, 2);
        assert_eq!(
            (api.free)(ptr),
            0,
            "{prefix}: the parent still owns its memory"
        );
        assert_eq!(fake.live_allocations(), 0);
    }
}

#[test]
fn last_error_no_driver_pools_attributes_and_contexts() {
    let _serial = exclusive();
    let fake = FakeControl::open(&fake_libraries().cudart);
    fake.reset();
    let cuda = Api::resolve(fake, "cuda");
    // SAFETY: the C signatures of these symbols.
    let (get_last, peek_last, attribute) = unsafe {
        (
            fake.function::<extern "C" fn() -> c_int>("cudaGetLastError"),
            fake.function::<extern "C" fn() -> c_int>("cudaPeekAtLastError"),
            fake.function::<unsafe extern "C" fn(*mut c_int, c_int, c_int) -> c_int>(
                "cudaDeviceGetAttribute",
            ),
        )
    };

    // No context until a device is made current or used.
    assert_eq!((fake.has_context(0), fake.has_context(1)), (0, 0));
    assert_eq!((cuda.set_device)(1), 0);
    assert_eq!((fake.has_context(0), fake.has_context(1)), (0, 1));

    // A failing call sets the thread's last error; peek keeps it, get clears it.
    assert_eq!((cuda.set_device)(7), 101);
    assert_eq!(peek_last(), 101);
    assert_eq!(fake.last_error(), 101);
    assert_eq!(
        std::thread::spawn(move || peek_last()).join().unwrap(),
        0,
        "per thread"
    );
    assert_eq!(get_last(), 101);
    assert_eq!(get_last(), 0);

    // Memory pools per device: without them, stream-ordered allocation is not supported.
    let pools = |device| {
        let mut value = -1;
        // SAFETY: `value` is valid for a write; 115 is cudaDevAttrMemoryPoolsSupported.
        let status = unsafe { attribute(&mut value, 115, device) };
        (status, value)
    };
    assert_eq!(pools(1), (0, 1));
    assert_eq!(fake.set_pools(1, false), 0);
    assert_eq!(pools(1), (0, 0));
    let mut block = ptr::null_mut();
    // SAFETY: `block` is valid for a write.
    let status = unsafe { (cuda.malloc_async)(&mut block, 64, handle(0)) };
    assert_eq!(status, 801, "cudaErrorNotSupported");
    assert_eq!(get_last(), 801);

    // A library without a driver fails every call with cudaErrorInsufficientDriver.
    fake.set_no_driver(true);
    assert_eq!(cuda.int(cuda.get_device_count).0, 35);
    assert_eq!(cuda.alloc(64).0, 35);
    assert_eq!(get_last(), 35);
    fake.reset();
    assert_eq!(
        cuda.int(cuda.get_device_count),
        (0, 2),
        "reset restores the driver"
    );
}

/// The capture calls of one fake library (an application's; devmm only asks
/// whether a stream captures).
struct CaptureApi {
    begin: extern "C" fn(Handle, c_int) -> c_int,
    end: unsafe extern "C" fn(Handle, *mut Handle) -> c_int,
    is_capturing: unsafe extern "C" fn(Handle, *mut c_int) -> c_int,
    graph_destroy: OnHandle,
    device_synchronize: extern "C" fn() -> c_int,
}

impl CaptureApi {
    fn resolve(fake: &FakeControl, prefix: &str) -> Self {
        let name = |suffix: &str| format!("{prefix}{suffix}");
        // SAFETY: each field's type is the C signature of the symbol it is resolved for.
        unsafe {
            Self {
                begin: fake.function(&name("StreamBeginCapture")),
                end: fake.function(&name("StreamEndCapture")),
                is_capturing: fake.function(&name("StreamIsCapturing")),
                graph_destroy: fake.function(&name("GraphDestroy")),
                device_synchronize: fake.function(&name("DeviceSynchronize")),
            }
        }
    }

    /// `*StreamIsCapturing`: 0 none, 1 active, 2 invalidated.
    fn status(&self, stream: Handle) -> c_int {
        let mut status = -1;
        // SAFETY: `status` is valid for a write.
        assert_eq!(unsafe { (self.is_capturing)(stream, &mut status) }, 0);
        status
    }

    /// `*StreamEndCapture`'s status; the graph it made is destroyed, and a
    /// failed end makes none.
    fn end(&self, stream: Handle) -> c_int {
        let mut graph = ptr::null_mut();
        // SAFETY: `graph` is valid for a write.
        let status = unsafe { (self.end)(stream, &mut graph) };
        assert_eq!(
            graph.is_null(),
            status != 0,
            "a graph exactly when the end succeeds"
        );
        if !graph.is_null() {
            assert_eq!((self.graph_destroy)(graph), 0);
        }
        status
    }
}

/// Stream capture as the CUDA programming guide specifies it, on both fakes:
/// captured work does not run; what a capture forbids fails and invalidates
/// it; waits across its boundary need the external flag; a stream that
/// joins a capture must be joined back before it ends; captures never merge.
#[test]
fn stream_capture_follows_the_programming_guides_rules() {
    let _serial = exclusive();
    for (library, prefix) in [
        (&fake_libraries().cudart, "cuda"),
        (&fake_libraries().hip, "hip"),
    ] {
        let fake = FakeControl::open(library);
        fake.reset();
        let api = Api::resolve(fake, prefix);
        let capture = CaptureApi::resolve(fake, prefix);
        let mut out = vec![0u8; 64];
        let _drain = Drain(fake);
        let (_, block) = api.alloc(64);
        let data: Vec<u8> = (1..=64).collect();
        // SAFETY: 64 host bytes into a 64-byte block; synchronous.
        let status = unsafe { (api.memcpy)(block, data.as_ptr().cast(), 64, HOST_TO_DEVICE) };
        assert_eq!(status, 0);
        let (_, stream) = api.create(api.stream_create, 0);
        let (_, other) = api.create(api.stream_create, 0);
        let (_, non_blocking) = api.create(api.stream_create, 0x1);
        let (_, event) = api.create(api.event_create, 0x2);

        // Captured work is a graph node: it does not run, not even after the capture ends.
        assert_eq!((capture.begin)(stream, 0), 0, "{prefix}");
        assert_eq!(capture.status(stream), 1);
        assert_eq!(api.to_host(&mut out, block, stream), 0);
        assert_eq!(capture.end(stream), 0);
        assert_eq!(capture.status(stream), 0);
        assert_eq!((api.stream_synchronize)(stream), 0);
        assert!(out.iter().all(|&b| b == 0), "{prefix}: captured work ran");
        assert_eq!(
            (capture.begin)(handle(0), 0),
            900,
            "{prefix}: not on the legacy stream"
        );

        // Forbidden calls fail with StreamCaptureUnsupported and invalidate the capture, whose
        // streams then refuse work until it ends, with the invalidation's error and no graph.
        let forbidden: [(&str, &dyn Fn() -> c_int); 3] = [
            ("stream synchronize", &|| (api.stream_synchronize)(stream)),
            ("device synchronize", &|| (capture.device_synchronize)()),
            ("synchronous allocation", &|| api.alloc(64).0),
        ];
        for (what, call) in forbidden {
            assert_eq!((capture.begin)(stream, 0), 0);
            assert_eq!(call(), 900, "{prefix}: {what}");
            assert_eq!(capture.status(stream), 2, "{prefix}: {what}");
            assert_eq!(
                api.to_host(&mut out, block, stream),
                901,
                "{prefix}: {what}"
            );
            assert_eq!(capture.end(stream), 901, "{prefix}: {what}");
        }
        // In relaxed mode, synchronous allocations and frees are allowed.
        assert_eq!((capture.begin)(stream, 2), 0);
        let (status, relaxed) = api.alloc(64);
        assert_eq!(status, 0, "{prefix}");
        assert_eq!((api.free)(relaxed), 0);
        assert_eq!(capture.end(stream), 0);

        // A stream-ordered allocation in a capture is an allocation node: a free in the same
        // capture is its free node, and so is one in another capture. A free node of memory no
        // graph allocated (made before the capture) is refused and invalidates the capture.
        let ordered = |on: Handle| {
            let mut ptr = ptr::null_mut();
            // SAFETY: `ptr` is valid for a write.
            let status = unsafe { (api.malloc_async)(&mut ptr, 64, on) };
            assert_eq!(status, 0, "{prefix}: an ordered allocation");
            ptr
        };
        let before = ordered(stream);
        assert_eq!((api.stream_synchronize)(stream), 0);
        assert_eq!((capture.begin)(stream, 0), 0);
        let node = ordered(stream);
        assert_eq!(
            (api.free_async)(node, stream),
            0,
            "{prefix}: its own free node"
        );
        assert_eq!(
            capture.end(stream),
            0,
            "{prefix}: a graph that frees what it allocates"
        );
        assert_eq!(
            (api.free_async)(node, stream),
            1,
            "{prefix}: the graph's block now"
        );
        assert_eq!((capture.begin)(stream, 0), 0);
        assert_eq!(
            (api.free_async)(before, stream),
            900,
            "{prefix}: not the graph's"
        );
        assert_eq!(capture.end(stream), 901);
        assert_eq!((capture.begin)(stream, 0), 0);
        let kept = ordered(stream);
        assert_eq!(capture.end(stream), 0);
        assert_eq!((capture.begin)(stream, 0), 0);
        assert_eq!(
            (api.free_async)(kept, stream),
            0,
            "{prefix}: another capture's"
        );
        assert_eq!(capture.end(stream), 0);
        assert_eq!((api.free_async)(before, stream), 0, "{prefix}");
        assert_eq!((api.stream_synchronize)(stream), 0);

        // The legacy stream cannot be used while a blocking stream captures; beside a
        // non-blocking one it can.
        assert_eq!((capture.begin)(stream, 0), 0);
        assert_eq!((api.stream_synchronize)(handle(0)), 906, "{prefix}");
        assert_eq!(capture.end(stream), 901);
        assert_eq!((capture.begin)(non_blocking, 0), 0);
        assert_eq!((api.stream_synchronize)(handle(0)), 0, "{prefix}");
        assert_eq!(capture.end(non_blocking), 0);

        // A capturing stream waiting on an event recorded outside the capture: a dependency
        // across its boundary, refused, unless the wait is external (CUDA's flag).
        assert_eq!((api.event_record)(event, other), 0);
        assert_eq!((capture.begin)(stream, 0), 0);
        assert_eq!((api.stream_wait_event)(stream, event, 0), 905, "{prefix}");
        assert_eq!(capture.end(stream), 901);
        if prefix == "cuda" {
            assert_eq!((capture.begin)(stream, 0), 0);
            assert_eq!((api.stream_wait_event)(stream, event, 1), 0);
            assert_eq!(capture.end(stream), 0);
            assert_eq!(
                (api.stream_wait_event)(stream, event, 1),
                1,
                "external outside a capture"
            );
        }

        // A stream waiting on a captured event joins the capture; the capture cannot end
        // until its work is joined back into the origin stream.
        assert_eq!((capture.begin)(stream, 0), 0);
        assert_eq!((api.event_record)(event, stream), 0);
        assert_eq!((api.stream_wait_event)(other, event, 0), 0);
        assert_eq!(capture.status(other), 1, "{prefix}: joined");
        assert_eq!(api.to_host(&mut out, block, other), 0);
        assert_eq!(capture.end(stream), 904, "{prefix}: unjoined");
        assert_eq!(
            capture.status(other),
            0,
            "{prefix}: the end takes it out too"
        );
        assert_eq!((capture.begin)(stream, 0), 0);
        assert_eq!((api.event_record)(event, stream), 0);
        assert_eq!((api.stream_wait_event)(other, event, 0), 0);
        assert_eq!(api.to_host(&mut out, block, other), 0);
        assert_eq!((api.event_record)(event, other), 0);
        assert_eq!((api.stream_wait_event)(stream, event, 0), 0);
        assert_eq!(capture.end(stream), 0, "{prefix}: joined back");
        assert_eq!((api.stream_synchronize)(other), 0);
        assert!(out.iter().all(|&b| b == 0), "{prefix}: captured work ran");

        // Two captures cannot be merged: both are invalidated. A stream outside a capture
        // cannot join an invalidated one.
        assert_eq!((capture.begin)(stream, 0), 0);
        assert_eq!((capture.begin)(non_blocking, 0), 0);
        assert_eq!((api.event_record)(event, stream), 0);
        assert_eq!(
            (api.stream_wait_event)(non_blocking, event, 0),
            902,
            "{prefix}: merge"
        );
        assert_eq!(
            (api.stream_wait_event)(other, event, 0),
            1,
            "{prefix}: join an invalidated"
        );
        assert_eq!(capture.end(non_blocking), 901);
        assert_eq!(capture.end(stream), 901);

        assert_eq!((api.event_destroy)(event), 0);
        for s in [stream, other, non_blocking] {
            assert_eq!((api.stream_destroy)(s), 0);
        }
        assert_eq!((api.free)(block), 0);
    }
}
