//! What a real driver would break, checked over the strict fakes (streams
//! run their work on their own threads, dead handles abort, last-error
//! state, pools, contexts): one test per defect of issue 12. The CUDA fake
//! stands for both platforms (the GPU engine is shared).

mod support;

use std::sync::Arc;

use devmm::dlpack::ffi::{DLDataType, DLDevice, DLManagedTensorVersioned, DLPackVersion, DLTensor};
use devmm::dlpack::{DlpackFlavor, DlpackRequest};
use devmm::mrs::cuda::{CudaAsyncMemoryResource, CudaRuntimeMemoryResource, PoolOptions};
use devmm::runtime::cuda::CudaRuntime;
use devmm::{
    DType, Device, DeviceBuffer, DeviceRuntime, DeviceType, EmptyOptions, Error, MemoryResource,
    StreamRuntime, StreamSentinel, Tensor, empty,
};
use support::fake_driver::{FakeControl, exclusive, fake_libraries};

/// Long enough that work queued on a fake stream has not run when the call
/// that queued it returns; the checks below rely only on this lower bound.
const DELAY_MICROS: u64 = 40_000;

/// A fresh fake and a runtime over it; resets the fake again when dropped
/// (which waits for every stream's work), so no host buffer a stream writes
/// is freed under it even when an assertion fails.
struct Fresh {
    fake: &'static FakeControl,
    // Dropped in this order: the runtime (which destroys its events), the
    // reset, the lock.
    rt: Arc<CudaRuntime>,
    _reset: Reset,
    _serial: std::sync::MutexGuard<'static, ()>,
}

/// Resets the fake when dropped.
struct Reset(&'static FakeControl);

impl Drop for Reset {
    fn drop(&mut self) {
        self.0.set_stream_delay(0);
        self.0.reset();
    }
}

impl Fresh {
    fn new() -> Fresh {
        let serial = exclusive();
        let fake = FakeControl::open(&fake_libraries().cudart);
        fake.reset();
        let rt = CudaRuntime::open(&fake_libraries().cudart).unwrap();
        fake.clear_calls();
        Fresh {
            fake,
            rt,
            _reset: Reset(fake),
            _serial: serial,
        }
    }
}

/// Queues seven device-to-device copies from `src` into `scratch` on
/// `stream`, so the next work queued there runs at least eight delays later.
fn busy(rt: &CudaRuntime, scratch: &DeviceBuffer, src: &DeviceBuffer, stream: &devmm::Stream) {
    for _ in 0..7 {
        // SAFETY: both are live fake-device buffers of at least 64 bytes.
        unsafe { rt.copy_device_to_device(scratch.ptr(), src.ptr(), 64, stream) }.unwrap();
    }
}

/// Reads `buffer` back (the copy synchronizes its stream).
fn read(buffer: &DeviceBuffer) -> Vec<u8> {
    let mut out = vec![0u8; 64];
    // SAFETY: fake device memory is host memory of the fake.
    unsafe { buffer.copy_to_host(&mut out) }.unwrap();
    out
}

fn data() -> Vec<u8> {
    (1..=64).collect()
}

/// Defect 3: a device without memory pools gets `cudaMalloc`, and a device
/// with them `cudaMallocAsync`.
#[test]
fn pools_are_checked_before_stream_ordered_allocation() {
    let f = Fresh::new();
    assert_eq!(f.fake.set_pools(1, false), 0);
    let without = CudaRuntimeMemoryResource::with_runtime(&f.rt, Device::cuda(1)).unwrap();
    assert!(!without.stream_ordered(), "{without:?}");
    let stream = f.rt.create_stream(Device::cuda(1)).unwrap();
    let ptr = without.allocate(64, &stream).unwrap();
    // SAFETY: allocated just above, freed once.
    unsafe { without.deallocate(ptr, 64, &stream) }.unwrap();
    assert_eq!(f.fake.call_count("cudaMallocAsync"), 0);
    assert_eq!(f.fake.call_count("cudaMalloc"), 1);

    let with = CudaRuntimeMemoryResource::with_runtime(&f.rt, Device::cuda(0)).unwrap();
    assert!(with.stream_ordered());
}

/// Issue 29, defect 6: the device's default pool is shared with every
/// library in the process (PyTorch, JAX, CuPy), so allocating from it
/// through devmm changes none of its settings (it never even asks for it).
#[test]
fn the_default_pool_settings_are_left_alone() {
    let f = Fresh::new();
    let gpu = Device::cuda(0);
    let mr = CudaRuntimeMemoryResource::with_runtime(&f.rt, gpu).unwrap();
    assert!(mr.stream_ordered(), "{mr:?}");
    let stream = f.rt.default_stream(gpu).unwrap();
    let ptr = mr.allocate(1 << 20, &stream).unwrap();
    // SAFETY: allocated just above, freed once.
    unsafe { mr.deallocate(ptr, 1 << 20, &stream) }.unwrap();
    stream.synchronize().unwrap();
    let default_resource = f.rt.default_resource(gpu).unwrap();
    let ptr = default_resource.allocate(64, &stream).unwrap();
    // SAFETY: allocated just above, freed once.
    unsafe { default_resource.deallocate(ptr, 64, &stream) }.unwrap();
    assert_eq!(
        f.fake.call_count("cudaMemPoolSetAttribute")
            + f.fake.call_count("cudaDeviceGetDefaultMemPool"),
        0,
        "devmm set an attribute of a pool it does not own: {:?}",
        f.fake.call_log()
    );
}

/// Defect 5: errors devmm handled are cleared from the runtime's last-error
/// state, so other libraries in the process do not see them.
#[test]
fn handled_errors_leave_no_last_error() {
    let f = Fresh::new();
    let gpu = Device::cuda(0);
    let mr = f.rt.default_resource(gpu).unwrap();
    let stream = f.rt.default_stream(gpu).unwrap();
    let err = mr.allocate(1 << 40, &stream).unwrap_err();
    assert!(err.is_out_of_memory(), "{err}");
    assert_eq!(
        f.fake.last_error(),
        0,
        "the handled out-of-memory is cleared"
    );
    assert_eq!(f.fake.fail_next("cudaStreamSynchronize", 700), 0);
    let err = stream.synchronize().unwrap_err();
    assert!(matches!(err, Error::Driver { .. }), "{err}");
    assert_eq!(
        f.fake.last_error(),
        0,
        "a reported driver error is cleared too"
    );
    assert_eq!(f.fake.set_device_count(0), 0);
    let none = CudaRuntime::open(&fake_libraries().cudart).unwrap_err();
    assert!(matches!(none, Error::RuntimeUnavailable { .. }), "{none}");
    assert_eq!(
        f.fake.last_error(),
        0,
        "no device is not an error left behind"
    );
}

/// Defect 6: a library that loads without a driver is an unavailable runtime
/// that says why.
#[test]
fn a_library_without_a_driver_is_an_unavailable_runtime() {
    let f = Fresh::new();
    f.fake.set_no_driver(true);
    let err = CudaRuntime::open(&fake_libraries().cudart).unwrap_err();
    let Error::RuntimeUnavailable { name, reason } = &err else {
        panic!("expected runtime unavailable, got {err:?}");
    };
    assert_eq!(name, "cuda");
    assert!(
        reason.contains("cudaErrorInsufficientDriver (35)"),
        "{reason}"
    );
    assert!(reason.contains("driver"), "{reason}");
}

/// Defect 7: a buffer allocated on the per-thread default stream and dropped
/// on another thread is freed after the allocating thread's work.
#[test]
fn a_per_thread_stream_buffer_freed_elsewhere_waits_for_its_thread() {
    let f = Fresh::new();
    let gpu = Device::cuda(0);
    let mr = f.rt.default_resource(gpu).unwrap();
    assert!(mr.stream_ordered());
    let legacy = f.rt.stream(gpu, StreamSentinel::LegacyDefault).unwrap();
    let source = DeviceBuffer::new(64, Arc::clone(&mr), &legacy).unwrap();
    // SAFETY: fake device memory.
    unsafe { source.copy_from_host(&data()) }.unwrap();
    let scratch = DeviceBuffer::new(64, Arc::clone(&mr), &legacy).unwrap();
    let result = DeviceBuffer::new(64, Arc::clone(&mr), &legacy).unwrap();
    f.fake.set_stream_delay(DELAY_MICROS);
    let (rt, mr2) = (Arc::clone(&f.rt), Arc::clone(&mr));
    let (src, dst, scr) = (source.ptr(), result.ptr(), scratch.ptr());
    let on_thread = std::thread::scope(|s| {
        s.spawn(|| {
            let per_thread = rt.stream(gpu, StreamSentinel::PerThreadDefault).unwrap();
            let buffer = DeviceBuffer::new(64, mr2, &per_thread).unwrap();
            // SAFETY: all four are live 64-byte fake-device allocations.
            unsafe {
                rt.copy_device_to_device(buffer.ptr(), src, 64, &per_thread)
                    .unwrap();
                for _ in 0..7 {
                    rt.copy_device_to_device(scr, buffer.ptr(), 64, &per_thread)
                        .unwrap();
                }
                // Still queued when the buffer is handed to another thread.
                rt.copy_device_to_device(dst, buffer.ptr(), 64, &per_thread)
                    .unwrap();
            }
            buffer
        })
        .join()
        .unwrap()
    });
    // Dropped here, on another thread than the one whose stream it is on.
    drop(on_thread);
    legacy.synchronize().unwrap();
    f.rt.stream(gpu, StreamSentinel::Default)
        .unwrap()
        .synchronize()
        .unwrap();
    assert_eq!(
        read(&result),
        data(),
        "the free overtook the allocating thread's copy"
    );
}

/// Exports a tensor allocated on `producer` to a consumer on `consumer`,
/// which reads it late there; the producer frees the buffer on `free_on`
/// while the export lives, then the consumer releases it: the release must
/// not overtake the consumer's read.
fn release_after_a_late_consumer(consumer_is_producer: bool, free_elsewhere: bool) {
    let f = Fresh::new();
    let gpu = Device::cuda(0);
    let mr = f.rt.default_resource(gpu).unwrap();
    let producer = f.rt.create_stream(gpu).unwrap();
    let consumer = match consumer_is_producer {
        true => producer.clone(),
        false => f.rt.create_stream(gpu).unwrap(),
    };
    let free_on = match free_elsewhere {
        true => f.rt.create_stream(gpu).unwrap(),
        false => producer.clone(),
    };
    let options = EmptyOptions::new()
        .resource(Arc::clone(&mr))
        .stream(producer.clone());
    let tensor = empty(&[64], DType::UINT8, &options).unwrap();
    // SAFETY: fake device memory.
    unsafe { tensor.buffer().copy_from_host(&data()) }.unwrap();
    let scratch = DeviceBuffer::new(64, Arc::clone(&mr), &consumer).unwrap();
    let result = DeviceBuffer::new(64, Arc::clone(&mr), &consumer).unwrap();
    let handle = i64::try_from(consumer.handle()).unwrap();
    let export = tensor
        .to_dlpack(&DlpackRequest::new().max_version(1, 1).stream(handle))
        .unwrap();
    f.fake.set_stream_delay(DELAY_MICROS);
    // The consumer reads the memory on its stream, late.
    busy(&f.rt, &scratch, tensor.buffer(), &consumer);
    // SAFETY: both are live 64-byte fake-device allocations.
    unsafe {
        f.rt.copy_device_to_device(result.ptr(), tensor.buffer().ptr(), 64, &consumer)
    }
    .unwrap();
    // The producer frees its handles; the consumer releases the export.
    tensor.buffer().free(&free_on).unwrap();
    drop(tensor);
    drop(export);
    consumer.synchronize().unwrap();
    free_on.synchronize().unwrap();
    assert_eq!(
        read(&result),
        data(),
        "the release overtook the consumer's read"
    );
}

/// Defect 8: when a DLPack consumer releases an export, the free is ordered
/// after the consumer's stream named at export time.
#[test]
fn an_export_release_waits_for_the_consumer_stream() {
    release_after_a_late_consumer(false, false);
}

/// A consumer that names the producer's own stream needs no hand-off, but
/// its work still orders a release: a `free` on another stream while the
/// export lives waits, at the release, for the work queued on the shared
/// stream, as it does for a consumer on a stream of its own.
#[test]
fn a_release_on_another_stream_waits_for_a_consumer_on_the_producers_stream() {
    release_after_a_late_consumer(true, true);
}

/// Set by [`foreign_deleter`]: the producer was told devmm is done.
static FOREIGN_DELETED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A producer's deleter that frees only the struct: the memory stays the
/// test's, which reuses it at once, as a caching allocator would.
unsafe extern "C" fn foreign_deleter(managed: *mut DLManagedTensorVersioned) {
    // SAFETY: made by `Box::into_raw` below, deleted once.
    drop(unsafe { Box::from_raw(managed) });
    FOREIGN_DELETED.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// A foreign GPU tensor (a producer's, through DLPack) is handed back to its
/// producer only once the work devmm queued on it has run: the producer
/// reuses the memory as soon as its deleter runs (PyTorch's and CuPy's
/// caching allocators do), with no ordering after devmm's stream.
#[test]
fn a_foreign_gpu_import_is_handed_back_after_the_work_queued_on_it() {
    let f = Fresh::new();
    let gpu = Device::cuda(0);
    let mr = f.rt.default_resource(gpu).unwrap();
    let stream = f.rt.create_stream(gpu).unwrap();
    // The producer's memory, and its own stream for what it does next.
    let lent = DeviceBuffer::new(64, Arc::clone(&mr), &stream).unwrap();
    // SAFETY: fake device memory.
    unsafe { lent.copy_from_host(&data()) }.unwrap();
    let producer = f.rt.create_stream(gpu).unwrap();
    let scratch = DeviceBuffer::new(64, Arc::clone(&mr), &stream).unwrap();
    let result = DeviceBuffer::new(64, Arc::clone(&mr), &stream).unwrap();
    let mut shape = [64i64];
    let mut strides = [1i64];
    let managed = Box::into_raw(Box::new(DLManagedTensorVersioned {
        version: DLPackVersion { major: 1, minor: 1 },
        manager_ctx: std::ptr::null_mut(),
        deleter: Some(foreign_deleter),
        flags: 0,
        dl_tensor: DLTensor {
            data: lent.ptr().as_host_ptr(),
            device: DLDevice {
                device_type: 2,
                device_id: 0,
            },
            ndim: 1,
            dtype: DLDataType {
                code: 1,
                bits: 8,
                lanes: 1,
            },
            shape: shape.as_mut_ptr(),
            strides: strides.as_mut_ptr(),
            byte_offset: 0,
        },
    }));
    FOREIGN_DELETED.store(false, std::sync::atomic::Ordering::SeqCst);
    // SAFETY: a live versioned struct, handed over; its shape and strides
    // outlive the import (they are read during it).
    let imported =
        unsafe { Tensor::from_dlpack_on(managed.cast(), DlpackFlavor::Versioned, &stream) }
            .unwrap();
    f.fake.set_stream_delay(DELAY_MICROS);
    // devmm reads the memory on its stream, late.
    busy(&f.rt, &scratch, &lent, &stream);
    // SAFETY: both are live 64-byte fake-device allocations.
    unsafe {
        f.rt.copy_device_to_device(result.ptr(), imported.data_ptr(), 64, &stream)
    }
    .unwrap();
    drop(imported);
    assert!(
        FOREIGN_DELETED.load(std::sync::atomic::Ordering::SeqCst),
        "handed back"
    );
    // The producer reuses its memory at once, on its own stream.
    // SAFETY: fake device memory, the producer's again.
    unsafe { f.rt.copy_host_to_device(lent.ptr(), &[0u8; 64], &producer) }.unwrap();
    stream.synchronize().unwrap();
    assert_eq!(
        read(&result),
        data(),
        "the producer got its memory back before devmm's queued read ran"
    );
}

/// Defect 9: pinned and managed memory export device id 0 (`dlpack.h`), and
/// devices without streams accept only `stream=None`.
#[test]
fn dlpack_device_ids_and_streamless_devices() {
    let f = Fresh::new();
    let host = Device::new(DeviceType::CudaHost, 1);
    for device in [host, Device::new(DeviceType::CudaManaged, 1)] {
        assert_eq!(device.dlpack_device(), (device.ty() as i32, 0), "{device}");
    }
    assert_eq!(Device::cuda(1).dlpack_device(), (2, 1));
    let mr = f.rt.default_resource(host).unwrap();
    let stream = f.rt.default_stream(host).unwrap();
    let options = EmptyOptions::new().resource(mr).stream(stream);
    let pinned = empty(&[4], DType::FLOAT32, &options).unwrap();
    let export = pinned
        .to_dlpack(&DlpackRequest::new().max_version(1, 1).dl_device(3, 0))
        .unwrap();
    drop(export);
    let cpu = empty(
        &[4],
        DType::FLOAT32,
        &EmptyOptions::new().device(Device::CPU),
    )
    .unwrap();
    cpu.to_dlpack(&DlpackRequest::new()).unwrap();
    cpu.to_dlpack(&DlpackRequest::new().stream(-1)).unwrap();
    for value in [0, 1, 2] {
        let err = cpu
            .to_dlpack(&DlpackRequest::new().stream(value))
            .unwrap_err();
        assert!(matches!(err, Error::Stream { .. }), "stream={value}: {err}");
    }
}

/// Defect 10: hand-offs reuse one event per stream, and the device count is
/// read once, at load.
#[test]
fn hand_offs_reuse_events_and_the_device_count_is_cached() {
    let f = Fresh::new();
    let gpu = Device::cuda(0);
    let consumer = f.rt.create_stream(gpu).unwrap();
    let options = EmptyOptions::new()
        .resource(f.rt.default_resource(gpu).unwrap())
        .stream(f.rt.default_stream(gpu).unwrap());
    let handle = i64::try_from(consumer.handle()).unwrap();
    let tensor = empty(&[16], DType::FLOAT32, &options).unwrap();
    f.fake.clear_calls();
    for _ in 0..3 {
        let request = DlpackRequest::new().max_version(1, 1).stream(handle);
        drop(tensor.to_dlpack(&request).unwrap());
    }
    // Each export: the consumer waits for the producer, and at release the
    // producer waits for the consumer.
    assert_eq!(f.fake.call_count("cudaEventRecord"), 6);
    assert_eq!(
        f.fake.call_count("cudaEventCreateWithFlags"),
        1,
        "one event, reused"
    );
    assert_eq!(f.fake.call_count("cudaEventDestroy"), 0);
    assert_eq!(
        f.fake.call_count("cudaGetDeviceCount"),
        0,
        "counted once, at load"
    );
}

/// A hand-off whose event call fails is a hand-off error (Python's
/// `StreamError`) carrying the driver's error, whichever call failed; the
/// next hand-off works.
#[test]
fn a_failed_hand_off_says_so_and_carries_the_driver_error() {
    let f = Fresh::new();
    let gpu = Device::cuda(0);
    let (consumer, producer) = (
        f.rt.create_stream(gpu).unwrap(),
        f.rt.create_stream(gpu).unwrap(),
    );
    for call in [
        "cudaEventCreateWithFlags",
        "cudaEventRecord",
        "cudaStreamWaitEvent",
    ] {
        assert_eq!(f.fake.fail_next(call, 700), 0);
        let err = consumer.wait(&producer).unwrap_err();
        let Error::Handoff { device, source } = &err else {
            panic!("{call}: expected a hand-off error, got {err:?}");
        };
        assert_eq!(*device, gpu);
        assert!(
            matches!(&**source, Error::Driver { source, .. } if source.call == call),
            "{call}: {source:?}"
        );
        assert!(
            err.to_string()
                .starts_with(&format!("stream hand-off failed: {call} failed on cuda:0")),
            "{err}"
        );
        assert_eq!(
            f.fake.last_error(),
            0,
            "{call}: the reported error is cleared"
        );
    }
    consumer.wait(&producer).unwrap();
}

/// Defect 4: activating a device on a fresh thread does not create a
/// context on GPU 0 when the guard restores the previous device.
#[test]
fn activation_on_a_fresh_thread_creates_no_context_on_gpu_0() {
    let f = Fresh::new();
    let gpu = Device::cuda(1);
    let rt = Arc::clone(&f.rt);
    std::thread::spawn(move || {
        let mr = rt.default_resource(gpu).unwrap();
        let stream = rt.create_stream(gpu).unwrap();
        let ptr = mr.allocate(64, &stream).unwrap();
        // SAFETY: allocated just above, freed once.
        unsafe { mr.deallocate(ptr, 64, &stream) }.unwrap();
        stream.synchronize().unwrap();
    })
    .join()
    .unwrap();
    assert_eq!(f.fake.has_context(1), 1, "the device asked for has one");
    assert_eq!(
        f.fake.has_context(0),
        0,
        "GPU 0 got a context nobody asked for"
    );
}

/// Where the issue-29 tests run: over the fake (held and reset, as
/// [`Fresh`]), or over the real CUDA runtime with `DEVMM_GPU_SMOKE=cuda`,
/// as `scripts/gpu-smoke.sh` sets it, so the smoke confirms them on a GPU.
struct OnDriver {
    rt: Arc<CudaRuntime>,
    fresh: Option<Fresh>,
    /// Bytes each queued copy moves: on the fake a small block and a delay
    /// keep queued work late; on a GPU, large copies do.
    nbytes: usize,
    /// On a GPU, the tests still run one at a time.
    _serial: Option<std::sync::MutexGuard<'static, ()>>,
}

impl OnDriver {
    fn new() -> OnDriver {
        if std::env::var("DEVMM_GPU_SMOKE").is_ok_and(|v| v == "cuda") {
            // A runtime of its own over the library discovery finds, so
            // no event or resource outlives the test (a rehearsal's fake
            // is reset between tests).
            let found = CudaRuntime::load().expect("the real CUDA runtime loads");
            let rt = CudaRuntime::open(found.library_path()).unwrap();
            return OnDriver {
                rt,
                fresh: None,
                _serial: Some(exclusive()),
                nbytes: 128 << 20,
            };
        }
        let fresh = Fresh::new();
        OnDriver {
            rt: Arc::clone(&fresh.rt),
            fresh: Some(fresh),
            _serial: None,
            nbytes: 64,
        }
    }

    /// Makes the fake's queued work late (a GPU's large copies are).
    fn slow(&self) {
        if let Some(fresh) = &self.fresh {
            fresh.fake.set_stream_delay(DELAY_MICROS);
        }
    }

    /// The fake's live allocations; `None` on a GPU.
    fn live_allocations(&self) -> Option<u64> {
        self.fresh.as_ref().map(|f| f.fake.live_allocations())
    }
}

/// [`busy`] with copies of `nbytes`.
fn busy_n(
    rt: &CudaRuntime,
    scratch: &DeviceBuffer,
    src: &DeviceBuffer,
    stream: &devmm::Stream,
    nbytes: usize,
) {
    for _ in 0..7 {
        // SAFETY: both are live device buffers of at least `nbytes` bytes.
        unsafe { rt.copy_device_to_device(scratch.ptr(), src.ptr(), nbytes, stream) }.unwrap();
    }
}

/// Issue 29, defect 1: a tensor whose stream is thread A's per-thread
/// default stream, exported on thread B, hands the consumer A's work: the
/// consumer reads what A's queued copy wrote, not stale bytes.
#[test]
fn an_export_on_another_thread_hands_over_the_per_thread_producers_work() {
    let f = OnDriver::new();
    let n = f.nbytes;
    let gpu = Device::cuda(0);
    let mr = f.rt.default_resource(gpu).unwrap();
    let legacy = f.rt.stream(gpu, StreamSentinel::LegacyDefault).unwrap();
    let source = DeviceBuffer::new(n, Arc::clone(&mr), &legacy).unwrap();
    // SAFETY: fake device memory.
    unsafe { source.copy_from_host(&data()) }.unwrap();
    let scratch = DeviceBuffer::new(n, Arc::clone(&mr), &legacy).unwrap();
    let consumer = f.rt.create_stream(gpu).unwrap();
    let result = DeviceBuffer::new(n, Arc::clone(&mr), &consumer).unwrap();
    f.slow();
    let (rt, mr2) = (Arc::clone(&f.rt), Arc::clone(&mr));
    let tensor = std::thread::scope(|s| {
        s.spawn(|| {
            let per_thread = rt.stream(gpu, StreamSentinel::PerThreadDefault).unwrap();
            let options = EmptyOptions::new().resource(mr2).stream(per_thread.clone());
            let tensor = empty(&[n], DType::UINT8, &options).unwrap();
            // Known bytes first (on a GPU, fresh pool memory may hold the
            // data already); the copy is synchronous.
            // SAFETY: device memory of at least 64 bytes.
            unsafe { tensor.buffer().copy_from_host(&[0; 64]) }.unwrap();
            busy_n(&rt, &scratch, &source, &per_thread, n);
            // SAFETY: both are live allocations of at least `n` bytes.
            unsafe {
                rt.copy_device_to_device(tensor.buffer().ptr(), source.ptr(), n, &per_thread)
            }
            .unwrap();
            // Still queued when the tensor is handed to another thread.
            tensor
        })
        .join()
        .unwrap()
    });
    let handle = i64::try_from(consumer.handle()).unwrap();
    let export = tensor
        .to_dlpack(&DlpackRequest::new().max_version(1, 1).stream(handle))
        .unwrap();
    // SAFETY: both are live allocations of at least `n` bytes.
    unsafe {
        f.rt.copy_device_to_device(result.ptr(), tensor.buffer().ptr(), n, &consumer)
    }
    .unwrap();
    assert_eq!(
        read(&result),
        data(),
        "the consumer read the tensor before the producer thread's copy into it"
    );
    drop(export);
}

/// Issue 29, defect 1: a capsule whose consumer is thread A's per-thread
/// default stream, released on thread B, is freed only after A's queued
/// read (else the read sees the fake's poison byte).
#[test]
fn a_release_on_another_thread_waits_for_the_per_thread_consumer() {
    let f = OnDriver::new();
    let n = f.nbytes;
    let gpu = Device::cuda(0);
    let mr = f.rt.default_resource(gpu).unwrap();
    let producer = f.rt.create_stream(gpu).unwrap();
    let options = EmptyOptions::new()
        .resource(Arc::clone(&mr))
        .stream(producer.clone());
    let tensor = empty(&[n], DType::UINT8, &options).unwrap();
    // SAFETY: fake device memory.
    unsafe { tensor.buffer().copy_from_host(&data()) }.unwrap();
    let legacy = f.rt.stream(gpu, StreamSentinel::LegacyDefault).unwrap();
    let scratch = DeviceBuffer::new(n, Arc::clone(&mr), &legacy).unwrap();
    let result = DeviceBuffer::new(n, Arc::clone(&mr), &legacy).unwrap();
    f.slow();
    let rt = Arc::clone(&f.rt);
    let export = std::thread::scope(|s| {
        s.spawn(|| {
            // stream=2: this thread's per-thread default stream consumes.
            let export = tensor
                .to_dlpack(&DlpackRequest::new().max_version(1, 1).stream(2))
                .unwrap();
            let per_thread = rt.stream(gpu, StreamSentinel::PerThreadDefault).unwrap();
            busy_n(&rt, &scratch, tensor.buffer(), &per_thread, n);
            // SAFETY: both are live allocations of at least `n` bytes.
            unsafe {
                rt.copy_device_to_device(result.ptr(), tensor.buffer().ptr(), n, &per_thread)
            }
            .unwrap();
            // Still queued when the capsule goes to another thread.
            export
        })
        .join()
        .unwrap()
    });
    tensor.buffer().free(&producer).unwrap();
    drop(tensor);
    // Released here, on another thread than its consumer's.
    drop(export);
    // The legacy stream waits for every blocking stream, per-thread ones included.
    legacy.synchronize().unwrap();
    assert_eq!(
        read(&result),
        data(),
        "the release overtook the per-thread consumer's read (use after free)"
    );
}

/// The capture calls an application makes (devmm only asks whether a
/// stream captures): taken from the library the runtime loaded, so they
/// are the fake's here and the driver's on a GPU.
struct Capturing {
    begin: unsafe extern "C" fn(*mut std::ffi::c_void, i32) -> i32,
    end: unsafe extern "C" fn(*mut std::ffi::c_void, *mut *mut std::ffi::c_void) -> i32,
    destroy: unsafe extern "C" fn(*mut std::ffi::c_void) -> i32,
    _library: libloading::Library,
}

impl Capturing {
    fn open(rt: &CudaRuntime) -> Capturing {
        // SAFETY: the CUDA runtime (or the fake) is already loaded; opening
        // it again only takes a reference.
        let library = unsafe { libloading::Library::new(rt.library_path()) }.unwrap();
        // SAFETY: the symbols have these C signatures in the CUDA runtime API.
        unsafe {
            Capturing {
                begin: *library.get(b"cudaStreamBeginCapture\0").unwrap(),
                end: *library.get(b"cudaStreamEndCapture\0").unwrap(),
                destroy: *library.get(b"cudaGraphDestroy\0").unwrap(),
                _library: library,
            }
        }
    }

    /// Begins a global-mode capture on `stream`.
    fn begin(&self, stream: &devmm::Stream) {
        // SAFETY: a live stream of the current device; mode 0 is global.
        let status = unsafe { (self.begin)(std::ptr::without_provenance_mut(stream.handle()), 0) };
        assert_eq!(status, 0, "cudaStreamBeginCapture");
    }

    /// Ends the capture on `stream`: its status (0 when the capture was
    /// intact), after destroying the graph it made.
    fn end(&self, stream: &devmm::Stream) -> i32 {
        let mut graph = std::ptr::null_mut();
        // SAFETY: `graph` is valid for a write.
        let status = unsafe {
            (self.end)(
                std::ptr::without_provenance_mut(stream.handle()),
                &mut graph,
            )
        };
        if !graph.is_null() {
            // SAFETY: a graph the call just made, destroyed once.
            assert_eq!(unsafe { (self.destroy)(graph) }, 0);
        }
        status
    }
}

/// Whether `err` is the capture refusal, naming the capture.
fn is_capture_refusal(err: &Error) -> bool {
    matches!(err, Error::StreamCapture { .. }) && err.to_string().contains("capturing")
}

/// Issue 29, defect 5: a DLPack hand-off into a stream being captured is
/// ordered after the producer without a dependency across the capture's
/// boundary (which the driver refuses, invalidating the capture).
#[test]
fn a_hand_off_into_a_capturing_stream_keeps_the_capture() {
    let f = OnDriver::new();
    let n = f.nbytes;
    let capture = Capturing::open(&f.rt);
    let gpu = Device::cuda(0);
    let mr = f.rt.default_resource(gpu).unwrap();
    let producer = f.rt.create_stream(gpu).unwrap();
    let consumer = f.rt.create_stream(gpu).unwrap();
    let options = EmptyOptions::new()
        .resource(Arc::clone(&mr))
        .stream(producer.clone());
    let tensor = empty(&[n], DType::UINT8, &options).unwrap();
    // SAFETY: device memory of at least 64 bytes (the copy is synchronous).
    unsafe { tensor.buffer().copy_from_host(&[0; 64]) }.unwrap();
    let source = DeviceBuffer::new(n, Arc::clone(&mr), &producer).unwrap();
    // SAFETY: as above.
    unsafe { source.copy_from_host(&data()) }.unwrap();
    let scratch = DeviceBuffer::new(n, Arc::clone(&mr), &producer).unwrap();
    f.slow();
    // The producer's work, still queued at the hand-off.
    busy_n(&f.rt, &scratch, &source, &producer, n);
    // SAFETY: both are live allocations of at least `n` bytes.
    unsafe {
        f.rt.copy_device_to_device(tensor.buffer().ptr(), source.ptr(), n, &producer)
    }
    .unwrap();
    // Made before the capture: a stream the producer is not ordered with.
    let apart =
        f.rt.create_stream_with_flags(gpu, devmm::StreamFlags::NonBlocking)
            .unwrap();
    capture.begin(&consumer);
    let handle = i64::try_from(consumer.handle()).unwrap();
    let export = tensor.to_dlpack(&DlpackRequest::new().max_version(1, 1).stream(handle));
    assert!(export.is_ok(), "the hand-off failed: {:?}", export.err());
    assert_eq!(capture.end(&consumer), 0, "the hand-off broke the capture");
    // Every launch of the graph comes after the hand-off returned: the
    // producer's work was done by then (its 320 ms of queued work on the
    // fake cannot have run in the meantime otherwise).
    let mut now = vec![0u8; 64];
    // SAFETY: a live allocation of at least 64 bytes; synchronous.
    unsafe {
        f.rt.copy_device_to_host(&mut now, tensor.buffer().ptr(), &apart)
    }
    .unwrap();
    assert_eq!(
        now,
        data(),
        "the graph could read the tensor before the producer's copy"
    );
    drop(export);
}

/// Issue 29, defect 5: a release whose consumer stream is being captured
/// neither frees the memory under the graph nor breaks the capture (a
/// release ordered after a captured event would join the capture).
#[test]
fn a_release_crossing_a_capture_keeps_the_memory_and_the_capture() {
    let f = OnDriver::new();
    let n = f.nbytes;
    let capture = Capturing::open(&f.rt);
    let gpu = Device::cuda(0);
    let mr = f.rt.default_resource(gpu).unwrap();
    let producer = f.rt.create_stream(gpu).unwrap();
    let consumer = f.rt.create_stream(gpu).unwrap();
    let options = EmptyOptions::new()
        .resource(Arc::clone(&mr))
        .stream(producer.clone());
    let tensor = empty(&[n], DType::UINT8, &options).unwrap();
    let result = DeviceBuffer::new(n, Arc::clone(&mr), &producer).unwrap();
    let handle = i64::try_from(consumer.handle()).unwrap();
    let export = tensor
        .to_dlpack(&DlpackRequest::new().max_version(1, 1).stream(handle))
        .unwrap();
    capture.begin(&consumer);
    // The graph reads the memory each time it is launched.
    // SAFETY: both are live allocations of at least `n` bytes.
    unsafe {
        f.rt.copy_device_to_device(result.ptr(), tensor.buffer().ptr(), n, &consumer)
    }
    .unwrap();
    let live = f.live_allocations();
    tensor.buffer().free(&producer).unwrap();
    drop(tensor);
    drop(export);
    assert_eq!(capture.end(&consumer), 0, "the release broke the capture");
    assert_eq!(
        f.live_allocations(),
        live,
        "the memory the captured graph reads was freed"
    );
}

/// While a blocking stream captures, the legacy default stream may not be
/// used at all ("any attempted use of the legacy stream is invalid"): its
/// capture query answers `cudaErrorStreamCaptureImplicit`, which means a
/// capture is under way, so an allocation or a free ordered on it is
/// refused as one on a capturing stream, and the capture goes on.
#[test]
fn the_legacy_stream_during_a_blocking_streams_capture_is_refused_and_keeps_the_capture() {
    let f = OnDriver::new();
    let capture = Capturing::open(&f.rt);
    let gpu = Device::cuda(0);
    let mr = f.rt.default_resource(gpu).unwrap();
    let legacy = f.rt.stream(gpu, StreamSentinel::LegacyDefault).unwrap();
    let blocking = f.rt.create_stream(gpu).unwrap();
    let kept = DeviceBuffer::new(64, Arc::clone(&mr), &legacy).unwrap();
    capture.begin(&blocking);
    assert!(
        legacy.is_capturing().unwrap(),
        "the legacy stream is bound by the capture"
    );
    let err = DeviceBuffer::new(64, Arc::clone(&mr), &legacy).unwrap_err();
    assert!(is_capture_refusal(&err), "{err:?}");
    let err = kept.free(&legacy).unwrap_err();
    let Error::FreeFailed { ref source, .. } = err else {
        panic!("expected the free's failure, got {err:?}");
    };
    assert!(is_capture_refusal(source), "{err:?}");
    // The capture's own graph allocation is refused there too, for the
    // same reason (not asked about: the driver would answer an error).
    let node = DeviceBuffer::new(64, Arc::clone(&mr), &blocking).unwrap();
    let err = node.free(&legacy).unwrap_err();
    let Error::FreeFailed { ref source, .. } = err else {
        panic!("expected the free's failure, got {err:?}");
    };
    assert!(is_capture_refusal(source), "{err:?}");
    assert!(err.to_string().contains("legacy default stream"), "{err}");
    node.free(&blocking).unwrap();
    // Ordering the capturing stream after the legacy one, or the other way,
    // would record or wait on the legacy stream: refused too.
    let err = blocking.wait(&legacy).unwrap_err();
    assert!(is_capture_refusal(&err), "{err:?}");
    let err = legacy.wait(&blocking).unwrap_err();
    assert!(is_capture_refusal(&err), "{err:?}");
    assert_eq!(
        capture.end(&blocking),
        0,
        "the refused calls broke the capture"
    );
    kept.free(&legacy).unwrap();
}

/// A graph's temporaries: memory a stream-ordered resource allocates on a
/// capturing stream is an allocation node of the graph, and its free on
/// that stream within the same capture is the graph's free node (so the
/// graph frees what it allocates and can be launched again). Memory from
/// before the capture (for which the driver refuses a free node and
/// invalidates the capture) or from another capture's graph (whose free
/// node here would run at every launch of this graph) is still refused,
/// before any driver call; memory from before goes back as usual once the
/// capture ends. For the default resource and for one over a pool of its
/// own.
#[test]
fn a_graph_allocation_freed_in_its_own_capture_becomes_its_free_node() {
    let f = OnDriver::new();
    let capture = Capturing::open(&f.rt);
    let gpu = Device::cuda(0);
    let resources: [Arc<dyn MemoryResource>; 2] = [
        f.rt.default_resource(gpu).unwrap(),
        Arc::new(
            CudaAsyncMemoryResource::with_runtime(&f.rt, gpu, PoolOptions::default()).unwrap(),
        ),
    ];
    for mr in resources {
        assert!(mr.stream_ordered(), "{mr:?}");
        let stream = f.rt.create_stream(gpu).unwrap();
        let live = f.live_allocations();
        let before = DeviceBuffer::new(64, Arc::clone(&mr), &stream).unwrap();
        capture.begin(&stream);
        let temporary = DeviceBuffer::new(64, Arc::clone(&mr), &stream).unwrap();
        temporary.free(&stream).unwrap();
        // Dropped without a free, a temporary is freed on its own stream.
        drop(DeviceBuffer::new(64, Arc::clone(&mr), &stream).unwrap());
        let err = before.free(&stream).unwrap_err();
        let Error::FreeFailed { ref source, .. } = err else {
            panic!("{mr:?}: expected the free's failure, got {err:?}");
        };
        assert!(is_capture_refusal(source), "{mr:?}: {err:?}");
        let kept = DeviceBuffer::new(64, Arc::clone(&mr), &stream).unwrap();
        assert_eq!(
            capture.end(&stream),
            0,
            "{mr:?}: the frees broke the capture"
        );
        capture.begin(&stream);
        let err = kept.free(&stream).unwrap_err();
        assert!(
            err.to_string()
                .contains("another capture's graph allocation"),
            "{mr:?}: {err:?}"
        );
        assert_eq!(capture.end(&stream), 0, "{mr:?}: another capture's block");
        before.free(&stream).unwrap();
        stream.synchronize().unwrap();
        // Its graph never ran, so on a GPU no memory stands behind `kept`
        // yet (a graph's allocation outlives the graph only once launched):
        // it is left, not freed.
        std::mem::forget(kept);
        assert_eq!(
            f.live_allocations(),
            live.map(|n| n + 1),
            "{mr:?}: a temporary or `before` was kept"
        );
    }
}

/// Two streams capturing two graphs cannot be ordered one after the other:
/// the driver refuses to merge separate captures and invalidates both. The
/// wait is refused before any event is recorded, and both captures end.
#[test]
fn a_wait_between_two_captures_is_refused_and_keeps_both() {
    let f = OnDriver::new();
    let capture = Capturing::open(&f.rt);
    let gpu = Device::cuda(0);
    let (a, b) = (
        f.rt.create_stream(gpu).unwrap(),
        f.rt.create_stream(gpu).unwrap(),
    );
    capture.begin(&a);
    capture.begin(&b);
    let err = a.wait(&b).unwrap_err();
    assert!(is_capture_refusal(&err), "{err:?}");
    assert!(err.to_string().contains("another capture"), "{err}");
    assert_eq!(
        capture.end(&a),
        0,
        "the refused wait broke the first capture"
    );
    assert_eq!(
        capture.end(&b),
        0,
        "the refused wait broke the second capture"
    );
}

/// Issue 29, defect 5: synchronizing a stream being captured is refused
/// with an error naming the capture, before the driver call that would
/// invalidate the capture.
#[test]
fn synchronizing_a_capturing_stream_is_refused_and_keeps_the_capture() {
    let f = OnDriver::new();
    let capture = Capturing::open(&f.rt);
    let stream = f.rt.create_stream(Device::cuda(0)).unwrap();
    capture.begin(&stream);
    let err = stream.synchronize().unwrap_err();
    assert!(is_capture_refusal(&err), "{err:?}");
    assert_eq!(
        capture.end(&stream),
        0,
        "the refused call broke the capture"
    );
}

/// Issue 29, defect 5: a synchronous allocation (`cudaMalloc`, pinned,
/// managed) on a stream being captured is refused with an error naming the
/// capture, before the driver call that would invalidate it.
#[test]
fn a_synchronous_allocation_on_a_capturing_stream_is_refused_and_keeps_the_capture() {
    use devmm::mrs::cuda::{CudaManagedMemoryResource, CudaPinnedMemoryResource};
    let f = OnDriver::new();
    let capture = Capturing::open(&f.rt);
    let gpu = Device::cuda(0);
    let stream = f.rt.create_stream(gpu).unwrap();
    let resources: [Arc<dyn MemoryResource>; 3] = [
        Arc::new(CudaRuntimeMemoryResource::synchronous(&f.rt, gpu).unwrap()),
        Arc::new(
            CudaPinnedMemoryResource::with_runtime(&f.rt, Device::new(DeviceType::CudaHost, 0))
                .unwrap(),
        ),
        Arc::new(
            CudaManagedMemoryResource::with_runtime(&f.rt, Device::new(DeviceType::CudaManaged, 0))
                .unwrap(),
        ),
    ];
    for mr in resources {
        capture.begin(&stream);
        let err = mr.allocate(64, &stream).unwrap_err();
        assert!(is_capture_refusal(&err), "{mr:?}: {err:?}");
        assert_eq!(
            capture.end(&stream),
            0,
            "{mr:?}: the refused call broke the capture"
        );
    }
}

/// Issue 29, defect 1: every operation on another thread's per-thread
/// default stream is ordered after that thread's work or refused with an
/// error naming the per-thread default stream, never sent with the raw
/// handle (which names the calling thread's own stream).
#[test]
fn another_threads_per_thread_stream_is_ordered_or_refused() {
    let f = OnDriver::new();
    let n = f.nbytes;
    let gpu = Device::cuda(0);
    let mr = f.rt.default_resource(gpu).unwrap();
    let legacy = f.rt.stream(gpu, StreamSentinel::LegacyDefault).unwrap();
    let source = DeviceBuffer::new(n, Arc::clone(&mr), &legacy).unwrap();
    // SAFETY: fake device memory.
    unsafe { source.copy_from_host(&data()) }.unwrap();
    let scratch = DeviceBuffer::new(n, Arc::clone(&mr), &legacy).unwrap();
    let result = DeviceBuffer::new(n, Arc::clone(&mr), &legacy).unwrap();
    f.slow();
    let rt = Arc::clone(&f.rt);
    let theirs = std::thread::scope(|s| {
        s.spawn(|| {
            let per_thread = rt.stream(gpu, StreamSentinel::PerThreadDefault).unwrap();
            busy_n(&rt, &scratch, &source, &per_thread, n);
            // SAFETY: both are live allocations of at least `n` bytes.
            unsafe { rt.copy_device_to_device(result.ptr(), source.ptr(), n, &per_thread) }
                .unwrap();
            per_thread
        })
        .join()
        .unwrap()
    });
    // Synchronizing it from here waits for the owner's work.
    theirs.synchronize().unwrap();
    // Read back on a stream the per-thread ones are not ordered with.
    let apart =
        f.rt.create_stream_with_flags(gpu, devmm::StreamFlags::NonBlocking)
            .unwrap();
    let mut now = vec![0u8; 64];
    // SAFETY: `result` is a live 64-byte fake-device allocation, `now`
    // 64 host bytes; the copy is finished when this returns.
    unsafe { f.rt.copy_device_to_host(&mut now, result.ptr(), &apart) }.unwrap();
    assert_eq!(
        now,
        data(),
        "synchronize did not wait for the owner thread's work"
    );
    // Work queued on it from here is refused, naming the stream.
    let refusals = [
        // SAFETY: a live 64-byte fake-device allocation (refused before any copy).
        unsafe { f.rt.copy_host_to_device(result.ptr(), &data(), &theirs) }.unwrap_err(),
        DeviceBuffer::new(64, Arc::clone(&mr), &theirs).unwrap_err(),
    ];
    for err in refusals {
        assert!(matches!(err, Error::Stream { .. }), "{err:?}");
        assert!(err.to_string().contains("PER_THREAD_DEFAULT"), "{err}");
    }
}

/// Issue 29, defect 1: an overlapping host-to-host `memcpy` ordered on
/// another thread's per-thread default stream runs after that thread's
/// queued work (a copy into the same managed memory), not after the
/// calling thread's own stream.
#[test]
fn a_host_memcpy_on_another_threads_per_thread_stream_waits_for_it() {
    use devmm::mrs::cuda::CudaManagedMemoryResource;
    let f = OnDriver::new();
    let gpu = Device::cuda(0);
    let mr = f.rt.default_resource(gpu).unwrap();
    let legacy = f.rt.stream(gpu, StreamSentinel::LegacyDefault).unwrap();
    let source = DeviceBuffer::new(64, Arc::clone(&mr), &legacy).unwrap();
    // SAFETY: device memory of 64 bytes.
    unsafe { source.copy_from_host(&data()) }.unwrap();
    let scratch = DeviceBuffer::new(64, Arc::clone(&mr), &legacy).unwrap();
    let managed = Device::new(DeviceType::CudaManaged, 0);
    let host_side = Arc::new(CudaManagedMemoryResource::with_runtime(&f.rt, managed).unwrap());
    let landing = DeviceBuffer::new(128, host_side, &legacy).unwrap();
    // SAFETY: managed memory of 128 bytes (synchronous).
    unsafe { landing.copy_from_host(&[0; 128]) }.unwrap();
    f.slow();
    let rt = Arc::clone(&f.rt);
    let theirs = std::thread::scope(|s| {
        s.spawn(|| {
            let per_thread = rt.stream(gpu, StreamSentinel::PerThreadDefault).unwrap();
            busy_n(&rt, &scratch, &source, &per_thread, 64);
            // SAFETY: both are live allocations of at least 64 bytes.
            unsafe { rt.copy_device_to_device(landing.ptr(), source.ptr(), 64, &per_thread) }
                .unwrap();
            per_thread
        })
        .join()
        .unwrap()
    });
    let shifted = devmm::DevicePtr::from_addr(landing.ptr().addr() + 32);
    // SAFETY: both ranges lie in the 128 managed bytes, which the host may
    // touch; they overlap, so the runtime moves them on the host after the
    // stream's work.
    unsafe {
        f.rt.memcpy(
            shifted,
            landing.ptr(),
            64,
            devmm::CopyKind::HostToHost,
            &theirs,
        )
    }
    .unwrap();
    legacy.synchronize().unwrap();
    let mut back = vec![0u8; 128];
    // SAFETY: as above.
    unsafe { landing.copy_to_host(&mut back) }.unwrap();
    assert_eq!(
        back[32..96],
        data()[..],
        "the host copy ran before the owner thread's copy into its source"
    );
}
