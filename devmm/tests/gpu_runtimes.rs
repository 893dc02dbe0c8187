//! The CUDA and ROCm runtimes against the fake driver libraries, through the
//! real generated loader: one suite, run for each platform.

mod fake;

use std::path::Path;
use std::sync::Arc;

use devmm::runtime::cuda::CudaRuntime;
use devmm::runtime::rocm::RocmRuntime;
use devmm::{
    Device, DeviceRuntime, DeviceType, Error, MemoryResource, StatisticsAdaptor, StreamSentinel,
};
use fake::Fake;

/// What differs between the platforms, as the suite needs it.
struct Platform {
    /// The fake's package (`fake-cudart`).
    package: &'static str,
    /// The variant without `*MallocAsync`.
    sync_package: &'static str,
    /// Symbol prefix (`cuda`, `hip`).
    prefix: &'static str,
    device: DeviceType,
    host: DeviceType,
    managed: DeviceType,
    /// Names in resource chains.
    device_mr: &'static str,
    pinned_mr: &'static str,
    managed_mr: &'static str,
    /// The pinned allocation and free calls.
    host_malloc: &'static str,
    host_free: &'static str,
    /// `*ErrorMemoryAllocation` / `hipErrorOutOfMemory`.
    oom_name: &'static str,
    /// The invalid-handle status and its name.
    invalid_handle: (i32, &'static str),
    open: fn(&Path) -> devmm::Result<Arc<dyn DeviceRuntime>>,
}

const CUDA: Platform = Platform {
    package: "fake-cudart",
    sync_package: "fake-cudart-sync",
    prefix: "cuda",
    device: DeviceType::Cuda,
    host: DeviceType::CudaHost,
    managed: DeviceType::CudaManaged,
    device_mr: "CudaRuntimeMemoryResource",
    pinned_mr: "CudaPinnedMemoryResource",
    managed_mr: "CudaManagedMemoryResource",
    host_malloc: "cudaMallocHost",
    host_free: "cudaFreeHost",
    oom_name: "cudaErrorMemoryAllocation",
    invalid_handle: (400, "cudaErrorInvalidResourceHandle"),
    open: |p| Ok(CudaRuntime::open(p)? as Arc<dyn DeviceRuntime>),
};

const ROCM: Platform = Platform {
    package: "fake-hip",
    sync_package: "fake-hip-sync",
    prefix: "hip",
    device: DeviceType::Rocm,
    host: DeviceType::RocmHost,
    managed: DeviceType::Rocm,
    device_mr: "HipRuntimeMemoryResource",
    pinned_mr: "HipPinnedMemoryResource",
    managed_mr: "HipManagedMemoryResource",
    host_malloc: "hipHostMalloc",
    host_free: "hipHostFree",
    oom_name: "hipErrorOutOfMemory",
    invalid_handle: (400, "hipErrorInvalidHandle"),
    open: |p| Ok(RocmRuntime::open(p)? as Arc<dyn DeviceRuntime>),
};

impl Platform {
    fn call(&self, suffix: &str) -> String {
        format!("{}{suffix}", self.prefix)
    }

    fn dev(&self, index: u32) -> Device {
        Device::new(self.device, index)
    }

    /// The fake (locked and reset) and a runtime over it.
    fn setup(
        &self,
        package: &str,
    ) -> (
        Fake,
        std::sync::MutexGuard<'static, ()>,
        Arc<dyn DeviceRuntime>,
    ) {
        let (fake, guard) = Fake::lock(package);
        let rt = (self.open)(&fake.path).unwrap();
        fake.clear_calls();
        (fake, guard, rt)
    }
}

/// The value of `key=` in a log line.
fn field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split(' ')
        .find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {key}= in {line:?}"))
}

fn hex(value: usize) -> String {
    format!("{value:#x}")
}

fn device_count_and_memory_info(p: &Platform) {
    let (fake, _g, rt) = p.setup(p.package);
    assert_eq!(rt.device_count().unwrap(), 2);
    assert_eq!(rt.devices().unwrap(), vec![p.dev(0), p.dev(1)]);
    fake.set_memory_limit(1, 1 << 20);
    let info = rt.memory_info(p.dev(1)).unwrap();
    assert_eq!((info.free, info.total), (1 << 20, 1 << 20));
    let mr = rt.default_resource(p.dev(1)).unwrap();
    let stream = rt.default_stream(p.dev(1)).unwrap();
    let ptr = mr.allocate(4096, &stream).unwrap();
    assert_eq!(rt.memory_info(p.dev(1)).unwrap().free, (1 << 20) - 4096);
    assert_eq!(mr.available_memory().unwrap().free, (1 << 20) - 4096);
    // SAFETY: allocated above with this size, freed once.
    unsafe { mr.deallocate(ptr, 4096, &stream).unwrap() };
    assert_eq!(fake.live_allocations(), 0);

    let err = rt.memory_info(p.dev(2)).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
    assert!(
        err.to_string()
            .contains(&format!("{} does not exist", p.dev(2))),
        "{err}"
    );
    fake.set_device_count(3);
    assert_eq!(rt.device_count().unwrap(), 3);
    fake.set_device_count(0);
    assert_eq!(
        rt.device_count().unwrap(),
        0,
        "no device is zero devices, not an error"
    );
    assert!(rt.devices().unwrap().is_empty());
}

fn activation_guard_restores_the_previous_device(p: &Platform) {
    let (fake, _g, rt) = p.setup(p.package);
    let set = p.call("SetDevice");
    {
        let _outer = rt.activate(p.dev(1)).unwrap();
        assert_eq!(fake.log_of(&set).len(), 1);
        assert_eq!(field(&fake.log_of(&set)[0], "device"), "1");
        {
            let _inner = rt.activate(p.dev(0)).unwrap();
            assert_eq!(field(fake.log_of(&set).last().unwrap(), "device"), "0");
        }
        assert_eq!(field(fake.log_of(&set).last().unwrap(), "device"), "1");
        // Already active: no call.
        let _same = rt.activate(p.dev(1)).unwrap();
        assert_eq!(fake.log_of(&set).len(), 3);
    }
    let lines = fake.log_of(&set);
    assert_eq!(lines.len(), 4);
    assert_eq!(
        field(&lines[3], "device"),
        "0",
        "the guard restores device 0"
    );
    assert!(rt.activate(Device::CPU).is_err());
}

fn streams_created_wrapped_and_builtin(p: &Platform) {
    let (fake, _g, rt) = p.setup(p.package);
    let dev = p.dev(1);
    let stream = rt.create_stream(dev).unwrap();
    assert!(stream.is_owned());
    assert_ne!(stream.handle(), 0);
    let created = fake.log_of(&p.call("StreamCreateWithFlags"));
    assert_eq!(created.len(), 1);
    assert_eq!(field(&created[0], "device"), "1", "created on its device");
    stream.synchronize().unwrap();
    let synced = fake.log_of(&p.call("StreamSynchronize"));
    assert_eq!(field(&synced[0], "stream"), hex(stream.handle()));

    let handle = stream.handle();
    let clone = stream.clone();
    drop(stream);
    assert_eq!(
        fake.calls(&p.call("StreamDestroy")),
        0,
        "a clone still lives"
    );
    drop(clone);
    let destroyed = fake.log_of(&p.call("StreamDestroy"));
    assert_eq!(destroyed.len(), 1);
    assert_eq!(field(&destroyed[0], "stream"), hex(handle));
    assert!(destroyed[0].ends_with("-> 0"), "{destroyed:?}");

    let owned_elsewhere = rt.create_stream(dev).unwrap();
    let wrapped = rt.wrap_stream(dev, owned_elsewhere.handle()).unwrap();
    assert!(!wrapped.is_owned());
    drop(wrapped);
    assert_eq!(
        fake.calls(&p.call("StreamDestroy")),
        1,
        "wrapped streams are not destroyed"
    );
    drop(owned_elsewhere);
    assert_eq!(fake.calls(&p.call("StreamDestroy")), 2);

    for which in [
        StreamSentinel::Default,
        StreamSentinel::LegacyDefault,
        StreamSentinel::PerThreadDefault,
    ] {
        let s = rt.stream(dev, which).unwrap();
        assert!(!s.is_owned());
        s.synchronize().unwrap();
    }
    assert_eq!(rt.default_stream(dev).unwrap().handle(), 0);
}

fn memcpy_of_every_kind(p: &Platform) {
    let (fake, _g, rt) = p.setup(p.package);
    let dev = p.dev(1);
    let stream = rt.create_stream(dev).unwrap();
    let mr = rt.default_resource(dev).unwrap();
    let data: Vec<u8> = (0..=255).collect();
    let a = mr.allocate(256, &stream).unwrap();
    let b = mr.allocate(256, &stream).unwrap();
    fake.clear_calls();
    // SAFETY: `a` and `b` are live 256-byte allocations of `dev`.
    unsafe {
        rt.copy_host_to_device(a, &data, &stream).unwrap();
        rt.copy_device_to_device(b, a, 256, &stream).unwrap();
    }
    let mut back = vec![0u8; 256];
    // SAFETY: as above.
    unsafe { rt.copy_device_to_host(&mut back, b, &stream).unwrap() };
    assert_eq!(back, data);
    let copies = fake.log_of(&p.call("MemcpyAsync"));
    let kinds: Vec<&str> = copies.iter().map(|l| field(l, "kind")).collect();
    assert_eq!(
        kinds,
        ["1", "3", "2"],
        "host-to-device, device-to-device, device-to-host"
    );
    assert!(copies
        .iter()
        .all(|l| field(l, "stream") == hex(stream.handle())));
    // SAFETY: empty copies touch nothing.
    unsafe { rt.copy_host_to_device(a, &[], &stream).unwrap() };
    assert_eq!(
        fake.log_of(&p.call("MemcpyAsync")).len(),
        3,
        "empty copies make no call"
    );

    // Pinned and managed memory: the driver infers the direction (kind 4).
    for ty in [p.host, p.managed] {
        let dev = Device::new(ty, 0);
        let mr = rt.default_resource(dev).unwrap();
        let s = rt.default_stream(dev).unwrap();
        let ptr = mr.allocate(256, &s).unwrap();
        fake.clear_calls();
        let mut back = vec![0u8; 256];
        // SAFETY: `ptr` is a live 256-byte allocation.
        unsafe {
            rt.copy_host_to_device(ptr, &data, &s).unwrap();
            rt.copy_device_to_host(&mut back, ptr, &s).unwrap();
        }
        assert_eq!(back, data);
        let kinds: Vec<String> = fake
            .log_of(&p.call("MemcpyAsync"))
            .iter()
            .map(|l| field(l, "kind").to_owned())
            .collect();
        if ty == p.device {
            assert_eq!(kinds, ["1", "2"]);
        } else {
            assert_eq!(kinds, ["4", "4"], "{ty}");
        }
        // SAFETY: allocated above, freed once.
        unsafe { mr.deallocate(ptr, 256, &s).unwrap() };
    }
    // SAFETY: allocated above, freed once.
    unsafe {
        mr.deallocate(a, 256, &stream).unwrap();
        mr.deallocate(b, 256, &stream).unwrap();
    }
    assert_eq!(fake.live_allocations(), 0);
}

fn out_of_memory_names_device_size_and_chain(p: &Platform) {
    let (fake, _g, rt) = p.setup(p.package);
    let dev = p.dev(1);
    fake.set_memory_limit(1, 1 << 20);
    let mr = StatisticsAdaptor::new(rt.default_resource(dev).unwrap());
    let stream = rt.default_stream(dev).unwrap();
    let err = mr.allocate(2 << 20, &stream).unwrap_err();
    let chain = format!(
        "StatisticsAdaptor -> {}(device={dev}, alignment=256, stream_ordered=true)",
        p.device_mr
    );
    match &err {
        Error::OutOfMemory {
            device,
            nbytes,
            chain: c,
            ..
        } => {
            assert_eq!(
                (*device, *nbytes, c.as_str()),
                (dev, 2 << 20, chain.as_str())
            );
        }
        other => panic!("expected out of memory, got {other:?}"),
    }
    let malloc = p.call("MallocAsync");
    assert_eq!(
        err.to_string(),
        format!(
            "out of memory: allocating 2097152 bytes on {dev} through {chain} failed \
             ({malloc} failed on {dev} with {} (2): out of memory); \
             free buffers you no longer need, or allocate less",
            p.oom_name
        )
    );
    assert!(err.is_out_of_memory());
    assert_eq!(mr.statistics().current_bytes, 0);
}

fn stream_handoff_records_then_waits(p: &Platform) {
    let (fake, _g, rt) = p.setup(p.package);
    let dev = p.dev(1);
    let producer = rt.create_stream(dev).unwrap();
    let theirs = rt.create_stream(dev).unwrap();
    let consumer = rt
        .consumer_stream(dev, Some(i64::try_from(theirs.handle()).unwrap()))
        .unwrap()
        .expect("a stream handle means: synchronize");
    assert!(!consumer.is_owned());
    fake.clear_calls();
    consumer.wait(&producer).unwrap();
    let log = fake.log();
    let names: Vec<&str> = log.iter().map(|l| l.split(' ').next().unwrap()).collect();
    let wanted = [
        "EventCreateWithFlags",
        "EventRecord",
        "StreamWaitEvent",
        "EventDestroy",
    ]
    .map(|s| p.call(s));
    let order: Vec<usize> = wanted
        .iter()
        .map(|w| {
            names
                .iter()
                .position(|n| n == w)
                .unwrap_or_else(|| panic!("no {w} in {log:?}"))
        })
        .collect();
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "create, record, wait, destroy in order: {log:?}"
    );
    let record = &log[order[1]];
    let wait = &log[order[2]];
    let event = field(&log[order[0]], "event");
    assert_eq!(field(record, "event"), event);
    assert_eq!(
        field(record, "stream"),
        hex(producer.handle()),
        "recorded on the producer"
    );
    assert_eq!(field(wait, "event"), event);
    assert_eq!(
        field(wait, "stream"),
        hex(theirs.handle()),
        "the consumer waits"
    );
    assert!(log.iter().all(|l| l.ends_with("-> 0")), "{log:?}");

    // -1: the consumer asked for no synchronization.
    assert!(rt.consumer_stream(dev, Some(-1)).unwrap().is_none());
    // A stream never waits on itself.
    fake.clear_calls();
    producer.wait(&producer).unwrap();
    assert!(fake.log().is_empty());
}

fn driver_errors_name_call_code_and_device(p: &Platform) {
    let (fake, _g, rt) = p.setup(p.package);
    let dev = p.dev(1);
    let stream = rt.create_stream(dev).unwrap();
    let (code, name) = p.invalid_handle;
    fake.fail_next(&p.call("StreamSynchronize"), code);
    let err = stream.synchronize().unwrap_err();
    match &err {
        Error::Driver {
            call,
            code: c,
            name: n,
            device,
            ..
        } => {
            assert_eq!(*call, p.call("StreamSynchronize"));
            assert_eq!((*c, n.as_str(), *device), (code, name, Some(dev)));
        }
        other => panic!("expected a driver error, got {other:?}"),
    }
    assert!(
        err.to_string().starts_with(&format!(
            "{}StreamSynchronize failed on {dev} with {name} (400): ",
            p.prefix
        )),
        "{err}"
    );
    stream.synchronize().unwrap();
}

fn stream_ordered_allocation_when_present(p: &Platform) {
    let (fake, _g, rt) = p.setup(p.package);
    let dev = p.dev(0);
    let mr = rt.default_resource(dev).unwrap();
    assert!(mr.stream_ordered());
    assert_eq!(mr.guaranteed_alignment(), 256);
    assert_eq!(
        format!("{mr:?}"),
        format!(
            "{}(device={dev}, alignment=256, stream_ordered=true)",
            p.device_mr
        )
    );
    assert!(
        Arc::ptr_eq(&mr, &rt.default_resource(dev).unwrap()),
        "one default per device"
    );
    let stream = rt.create_stream(dev).unwrap();
    fake.clear_calls();
    let ptr = mr.allocate(1000, &stream).unwrap();
    assert!(ptr.is_aligned(256));
    // SAFETY: allocated above, freed once.
    unsafe { mr.deallocate(ptr, 1000, &stream).unwrap() };
    let alloc = fake.log_of(&p.call("MallocAsync"));
    let free = fake.log_of(&p.call("FreeAsync"));
    assert_eq!((alloc.len(), free.len()), (1, 1));
    assert_eq!(field(&alloc[0], "stream"), hex(stream.handle()));
    assert_eq!(field(&free[0], "stream"), hex(stream.handle()));
    assert_eq!(fake.calls(&p.call("Malloc")), 0);
    // Zero bytes: null, no call.
    assert!(mr.allocate(0, &stream).unwrap().is_null());
    // A stream of another device is refused by a stream-ordered resource.
    let other = rt.default_stream(p.dev(1)).unwrap();
    assert!(matches!(mr.allocate(8, &other), Err(Error::Stream { .. })));
    assert_eq!(fake.live_allocations(), 0);
}

fn synchronous_allocation_without_async_symbols(p: &Platform) {
    let (fake, _g, rt) = p.setup(p.sync_package);
    let dev = p.dev(0);
    let mr = rt.default_resource(dev).unwrap();
    assert!(!mr.stream_ordered());
    assert_eq!(
        format!("{mr:?}"),
        format!("{}(device={dev}, alignment=256)", p.device_mr)
    );
    let stream = rt.default_stream(dev).unwrap();
    let ptr = mr.allocate(1000, &stream).unwrap();
    // SAFETY: allocated above, freed once.
    unsafe { mr.deallocate(ptr, 1000, &stream).unwrap() };
    assert_eq!(
        (fake.calls(&p.call("Malloc")), fake.calls(&p.call("Free"))),
        (1, 1)
    );
    assert_eq!(fake.live_allocations(), 0);
}

fn pinned_and_managed_resources(p: &Platform) {
    let (fake, _g, rt) = p.setup(p.package);
    let host = Device::new(p.host, 0);
    let pinned = rt.default_resource(host).unwrap();
    assert_eq!(
        format!("{pinned:?}"),
        format!("{}(device={host}, alignment=256)", p.pinned_mr)
    );
    let s = rt.default_stream(host).unwrap();
    let ptr = pinned.allocate(100, &s).unwrap();
    // Pinned memory is host memory: the host may touch it.
    // SAFETY: `ptr` is a live, host-accessible 100-byte allocation.
    unsafe { ptr.as_host_ptr::<u8>().write_bytes(7, 100) };
    // SAFETY: allocated above, freed once.
    unsafe { pinned.deallocate(ptr, 100, &s).unwrap() };
    assert_eq!((fake.calls(p.host_malloc), fake.calls(p.host_free)), (1, 1));
    assert!(pinned.available_memory().unwrap().total > 0);

    let managed_dev = Device::new(p.managed, 1);
    let managed: Arc<dyn MemoryResource> = if p.prefix == "cuda" {
        let rt = CudaRuntime::open(&fake.path).unwrap();
        Arc::new(
            devmm::mrs::cuda::CudaManagedMemoryResource::with_runtime(&rt, managed_dev).unwrap(),
        )
    } else {
        let rt = RocmRuntime::open(&fake.path).unwrap();
        Arc::new(
            devmm::mrs::rocm::HipManagedMemoryResource::with_runtime(&rt, managed_dev).unwrap(),
        )
    };
    assert_eq!(
        format!("{managed:?}"),
        format!("{}(device={managed_dev}, alignment=256)", p.managed_mr)
    );
    let s = rt.default_stream(managed_dev).unwrap();
    fake.clear_calls();
    let ptr = managed.allocate(100, &s).unwrap();
    // SAFETY: allocated above, freed once.
    unsafe { managed.deallocate(ptr, 100, &s).unwrap() };
    let alloc = fake.log_of(&p.call("MallocManaged"));
    assert_eq!(alloc.len(), 1);
    assert_eq!(field(&alloc[0], "flags"), "1", "attached globally");
    assert_eq!(
        field(&alloc[0], "device"),
        "1",
        "allocated with its device active"
    );
    assert_eq!(fake.calls(&p.call("Free")), 1);
    assert_eq!(fake.live_allocations(), 0);
}

fn missing_library_is_runtime_unavailable(p: &Platform) {
    let err = (p.open)(Path::new("/nonexistent/libdriver.so")).unwrap_err();
    match &err {
        Error::RuntimeUnavailable { name, reason } => {
            assert_eq!(name, if p.prefix == "cuda" { "cuda" } else { "rocm" });
            assert!(
                reason.starts_with("cannot load /nonexistent/libdriver.so: "),
                "{reason}"
            );
        }
        other => panic!("expected runtime unavailable, got {other:?}"),
    }
}

macro_rules! platform_tests {
    ($module:ident, $platform:ident) => {
        mod $module {
            use super::*;
            #[test]
            fn device_count_and_memory_info() {
                super::device_count_and_memory_info(&$platform)
            }
            #[test]
            fn activation_guard_restores_the_previous_device() {
                super::activation_guard_restores_the_previous_device(&$platform)
            }
            #[test]
            fn streams_created_wrapped_and_builtin() {
                super::streams_created_wrapped_and_builtin(&$platform)
            }
            #[test]
            fn memcpy_of_every_kind() {
                super::memcpy_of_every_kind(&$platform)
            }
            #[test]
            fn out_of_memory_names_device_size_and_chain() {
                super::out_of_memory_names_device_size_and_chain(&$platform)
            }
            #[test]
            fn stream_handoff_records_then_waits() {
                super::stream_handoff_records_then_waits(&$platform)
            }
            #[test]
            fn driver_errors_name_call_code_and_device() {
                super::driver_errors_name_call_code_and_device(&$platform)
            }
            #[test]
            fn stream_ordered_allocation_when_present() {
                super::stream_ordered_allocation_when_present(&$platform)
            }
            #[test]
            fn synchronous_allocation_without_async_symbols() {
                super::synchronous_allocation_without_async_symbols(&$platform)
            }
            #[test]
            fn pinned_and_managed_resources() {
                super::pinned_and_managed_resources(&$platform)
            }
            #[test]
            fn missing_library_is_runtime_unavailable() {
                super::missing_library_is_runtime_unavailable(&$platform)
            }
        }
    };
}

platform_tests!(cuda, CUDA);
platform_tests!(rocm, ROCM);

#[test]
fn missing_required_symbols_are_all_listed_in_one_error() {
    let path = fake::path("fake-cudart-minimal");
    let err = CudaRuntime::open(&path).unwrap_err();
    let Error::RuntimeUnavailable { name, reason } = &err else {
        panic!("expected runtime unavailable, got {err:?}");
    };
    assert_eq!(name, "cuda");
    let missing = [
        ("cudaGetDevice", "1.0"),
        ("cudaSetDevice", "1.0"),
        ("cudaMemGetInfo", "3.0"),
        ("cudaMalloc", "1.0"),
        ("cudaFree", "1.0"),
        ("cudaMallocHost", "1.0"),
        ("cudaFreeHost", "1.0"),
        ("cudaMallocManaged", "6.0"),
        ("cudaMemcpy", "1.0"),
        ("cudaMemcpyAsync", "1.1"),
        ("cudaStreamCreateWithFlags", "5.0"),
        ("cudaStreamDestroy", "1.1"),
        ("cudaStreamSynchronize", "1.1"),
        ("cudaStreamWaitEvent", "3.2"),
        ("cudaEventCreateWithFlags", "2.2"),
        ("cudaEventRecord", "1.1"),
        ("cudaEventDestroy", "1.1"),
    ]
    .map(|(n, v)| format!("{n} (since {v})"))
    .join(", ");
    assert_eq!(
        *reason,
        format!(
            "{} is not a usable CUDA runtime: it lacks the required symbols {missing}; \
             install a newer CUDA runtime or point DEVMM_CUDART_PATH at one",
            path.display()
        )
    );
    // The optional symbols it also lacks are not reported.
    assert!(!reason.contains("cudaMallocAsync"));
}

#[test]
fn cuda_stream_sentinels_and_dlpack_stream_values() {
    let (_fake, _g, rt) = CUDA.setup(CUDA.package);
    let dev = CUDA.dev(0);
    let handle = |which| rt.stream(dev, which).unwrap().handle();
    assert_eq!(handle(StreamSentinel::Default), 0);
    assert_eq!(handle(StreamSentinel::LegacyDefault), 1);
    assert_eq!(handle(StreamSentinel::PerThreadDefault), 2);
    let consumer = |v| rt.consumer_stream(dev, v).map(|s| s.map(|s| s.handle()));
    assert_eq!(
        consumer(None).unwrap(),
        Some(1),
        "no value: the legacy default stream"
    );
    assert_eq!(consumer(Some(-1)).unwrap(), None);
    assert_eq!(consumer(Some(1)).unwrap(), Some(1));
    assert_eq!(consumer(Some(2)).unwrap(), Some(2));
    assert_eq!(consumer(Some(0x5000)).unwrap(), Some(0x5000));
    for refused in [0, -2] {
        let err = consumer(Some(refused)).unwrap_err();
        assert!(
            matches!(err, Error::Stream { device, .. } if device == dev),
            "{err}"
        );
    }
    assert!(consumer(Some(0))
        .unwrap_err()
        .to_string()
        .contains("disallowed for CUDA"));
}

#[test]
fn rocm_stream_sentinels_and_dlpack_stream_values() {
    let (_fake, _g, rt) = ROCM.setup(ROCM.package);
    let dev = ROCM.dev(0);
    let handle = |which| rt.stream(dev, which).unwrap().handle();
    assert_eq!(handle(StreamSentinel::Default), 0);
    assert_eq!(handle(StreamSentinel::LegacyDefault), 0);
    assert_eq!(handle(StreamSentinel::PerThreadDefault), 2);
    let consumer = |v| rt.consumer_stream(dev, v).map(|s| s.map(|s| s.handle()));
    assert_eq!(consumer(None).unwrap(), Some(0));
    assert_eq!(consumer(Some(0)).unwrap(), Some(0));
    assert_eq!(consumer(Some(-1)).unwrap(), None);
    assert_eq!(consumer(Some(0x5000)).unwrap(), Some(0x5000));
    for refused in [1, 2, -7] {
        assert!(
            matches!(consumer(Some(refused)), Err(Error::Stream { .. })),
            "{refused}"
        );
    }
}

#[test]
fn versions_and_library_path() {
    let (_fake, _g, _rt) = CUDA.setup(CUDA.package);
    let rt = CudaRuntime::open(fake::path("fake-cudart")).unwrap();
    let (runtime, driver) = rt.versions().unwrap();
    assert!(runtime > 0 && driver >= runtime, "{runtime} {driver}");
    assert_eq!(rt.library_path(), fake::path("fake-cudart").as_os_str());
    assert!(rt.has_stream_ordered_allocation());
    let sync = CudaRuntime::open(fake::path("fake-cudart-sync")).unwrap();
    assert!(!sync.has_stream_ordered_allocation());
}
