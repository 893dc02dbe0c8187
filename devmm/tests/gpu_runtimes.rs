//! The CUDA and ROCm runtimes through the real generated loader: one suite,
//! run for each platform.
//!
//! By default the suite runs against the fake driver libraries from
//! `tests/` and also checks, through their call logs, what devmm asked the
//! driver to do. With `DEVMM_GPU_SMOKE=cuda` (or `rocm`), as
//! `scripts/gpu-smoke.sh` sets it, that platform's tests run against the
//! real driver instead: every behavioural check runs, the call-log checks
//! are left out, and the tests that need failure injection say they were
//! skipped.

mod support;

use std::ffi::{c_int, c_void};
use std::path::{Path, PathBuf};
use std::sync::{Arc, MutexGuard};

use devmm::mrs::cuda::{
    CudaAsyncMemoryResource, CudaManagedMemoryResource, CudaPinnedMemoryResource,
    CudaRuntimeMemoryResource, PoolOptions,
};
use devmm::mrs::rocm::{
    HipAsyncMemoryResource, HipManagedMemoryResource, HipPinnedMemoryResource,
    HipRuntimeMemoryResource,
};
use devmm::runtime::cuda::CudaRuntime;
use devmm::runtime::rocm::RocmRuntime;
use devmm::statistics::{OrderBy, ProfilerRecords, profile};
use devmm::testing::{MrConformanceOptions, mr_conformance};
use devmm::{
    Device, DeviceBuffer, DeviceRuntime, DeviceType, Error, MallocMemoryResource, MemoryResource,
    PoolStatistics, StatisticsAdaptor, Stream, StreamRuntime, StreamSentinel,
};
use support::fake_driver::{FakeControl, FakeLibraries, exclusive, fake_libraries};
use support::fork::in_forked_child;

type Loader = fn(Option<&Path>) -> devmm::Result<Arc<dyn DeviceRuntime>>;
type ManagedLoader = fn(Option<&Path>, Device) -> devmm::Result<Arc<dyn MemoryResource>>;
type OwnPoolLoader = fn(Option<&Path>, Device, PoolOptions) -> devmm::Result<Arc<dyn OwnPool>>;
type PinnedLoader = fn(Option<&Path>, Device) -> devmm::Result<Arc<dyn OwnPool>>;

/// A resource over a pool of its own (a device pool, or the pinned
/// resource's host pool), as the tests use both platforms'.
trait OwnPool: MemoryResource {
    fn figures(&self) -> PoolStatistics;
    fn trim_to(&self, keep: usize);
    fn reset_high_water(&self) -> devmm::Result<()>;
}

macro_rules! own_pool {
    ($($ty:ty),*) => {$(
        impl OwnPool for $ty {
            fn figures(&self) -> PoolStatistics {
                MemoryResource::pool_statistics(self).unwrap().unwrap()
            }
            fn trim_to(&self, keep: usize) {
                self.trim(keep).unwrap()
            }
            fn reset_high_water(&self) -> devmm::Result<()> {
                self.reset_pool_high_water()
            }
        }
    )*};
}

own_pool!(
    CudaAsyncMemoryResource,
    HipAsyncMemoryResource,
    CudaPinnedMemoryResource,
    HipPinnedMemoryResource
);

/// What differs between the platforms, as the suite needs it.
struct Platform {
    /// The devmm runtime name, also the `DEVMM_GPU_SMOKE` value.
    runtime: &'static str,
    /// The variable naming the library the process-wide runtime loads.
    path_var: &'static str,
    /// The fake library.
    fake: fn(&FakeLibraries) -> &PathBuf,
    /// The fake without `*MallocAsync`.
    fake_sync: fn(&FakeLibraries) -> &PathBuf,
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
    /// `cudaErrorMemoryAllocation` / `hipErrorOutOfMemory`.
    oom_name: &'static str,
    /// The invalid-handle status and its name.
    invalid_handle: (i32, &'static str),
    /// The library at a path, or the process-wide runtime.
    load: Loader,
    /// A managed-memory resource over the library at a path, or the
    /// process-wide runtime.
    managed_resource: ManagedLoader,
    /// Device memory through the synchronous allocator (`*Malloc`).
    sync_device: ManagedLoader,
    /// The resource over a pool of its own, and its name.
    own_pool: OwnPoolLoader,
    pool_mr: &'static str,
    /// The pinned resource over the library at a path, or the process-wide
    /// runtime.
    pinned: PinnedLoader,
}

/// The CUDA runtime over the library at a path, or the process-wide one.
fn cuda_runtime(path: Option<&Path>) -> devmm::Result<Arc<CudaRuntime>> {
    match path {
        Some(path) => CudaRuntime::open(path),
        None => CudaRuntime::load(),
    }
}

/// The HIP runtime over the library at a path, or the process-wide one.
fn rocm_runtime(path: Option<&Path>) -> devmm::Result<Arc<RocmRuntime>> {
    match path {
        Some(path) => RocmRuntime::open(path),
        None => RocmRuntime::load(),
    }
}

const CUDA: Platform = Platform {
    runtime: "cuda",
    path_var: "DEVMM_CUDART_PATH",
    fake: |f| &f.cudart,
    fake_sync: |f| &f.cudart_sync,
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
    load: |path| Ok(cuda_runtime(path)? as Arc<dyn DeviceRuntime>),
    managed_resource: |path, device| {
        let rt = cuda_runtime(path)?;
        Ok(Arc::new(CudaManagedMemoryResource::with_runtime(
            &rt, device,
        )?))
    },
    sync_device: |path, device| {
        let rt = cuda_runtime(path)?;
        Ok(Arc::new(CudaRuntimeMemoryResource::synchronous(
            &rt, device,
        )?))
    },
    own_pool: |path, device, options| {
        let rt = cuda_runtime(path)?;
        Ok(Arc::new(CudaAsyncMemoryResource::with_runtime(
            &rt, device, options,
        )?))
    },
    pool_mr: "CudaAsyncMemoryResource",
    pinned: |path, device| {
        let rt = cuda_runtime(path)?;
        Ok(Arc::new(CudaPinnedMemoryResource::with_runtime(
            &rt, device,
        )?))
    },
};

const ROCM: Platform = Platform {
    runtime: "rocm",
    path_var: "DEVMM_HIP_PATH",
    fake: |f| &f.hip,
    fake_sync: |f| &f.hip_sync,
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
    load: |path| Ok(rocm_runtime(path)? as Arc<dyn DeviceRuntime>),
    managed_resource: |path, device| {
        let rt = rocm_runtime(path)?;
        Ok(Arc::new(HipManagedMemoryResource::with_runtime(
            &rt, device,
        )?))
    },
    sync_device: |path, device| {
        let rt = rocm_runtime(path)?;
        Ok(Arc::new(HipRuntimeMemoryResource::synchronous(
            &rt, device,
        )?))
    },
    own_pool: |path, device, options| {
        let rt = rocm_runtime(path)?;
        Ok(Arc::new(HipAsyncMemoryResource::with_runtime(
            &rt, device, options,
        )?))
    },
    pool_mr: "HipAsyncMemoryResource",
    pinned: |path, device| {
        let rt = rocm_runtime(path)?;
        Ok(Arc::new(HipPinnedMemoryResource::with_runtime(
            &rt, device,
        )?))
    },
};

impl Platform {
    fn call(&self, suffix: &str) -> String {
        format!("{}{suffix}", self.prefix)
    }

    fn dev(&self, index: u32) -> Device {
        Device::new(self.device, index)
    }

    /// Whether this run targets the real driver (`DEVMM_GPU_SMOKE`).
    fn on_hardware(&self) -> bool {
        std::env::var("DEVMM_GPU_SMOKE").is_ok_and(|v| v == self.runtime)
    }
}

/// A fake's log lines for calls to `name` (the name is a line's first word).
fn log_of(fake: &FakeControl, name: &str) -> Vec<String> {
    fake.call_log()
        .into_iter()
        .filter(|l| l.split(' ').next() == Some(name))
        .collect()
}

/// The driver under test: a fake (held exclusively, reset, its call log
/// cleared), or the real driver on hardware.
struct Under {
    p: &'static Platform,
    rt: Arc<dyn DeviceRuntime>,
    fake: Option<(&'static FakeControl, PathBuf)>,
    _serial: Option<MutexGuard<'static, ()>>,
}

impl Under {
    fn new(p: &'static Platform) -> Under {
        Under::with_library(p, p.fake)
    }

    fn with_library(p: &'static Platform, library: fn(&FakeLibraries) -> &PathBuf) -> Under {
        if p.on_hardware() {
            let rt = (p.load)(None).expect("the real driver loads");
            return Under {
                p,
                rt,
                fake: None,
                _serial: None,
            };
        }
        let serial = exclusive();
        let path = library(fake_libraries()).clone();
        let fake = FakeControl::open(&path);
        fake.reset();
        let rt = (p.load)(Some(&path)).unwrap();
        fake.clear_calls();
        Under {
            p,
            rt,
            fake: Some((fake, path)),
            _serial: Some(serial),
        }
    }

    /// A second device: `*:1` on the fakes (two devices), the last device
    /// on hardware (which may have only one).
    fn second(&self) -> Device {
        match self.fake {
            Some(_) => self.p.dev(1),
            None => {
                let count = self.rt.device_count().unwrap();
                self.p.dev(u32::try_from(count.max(1) - 1).unwrap())
            }
        }
    }

    /// The fake, for checks that need its call log or failure injection.
    fn fake(&self) -> Option<&'static FakeControl> {
        self.fake.as_ref().map(|(f, _)| *f)
    }

    /// The fake library's path.
    fn fake_path(&self) -> Option<&Path> {
        self.fake.as_ref().map(|(_, p)| p.as_path())
    }

    fn assert_no_leaks(&self) {
        if let Some(fake) = self.fake() {
            assert_eq!(fake.live_allocations(), 0, "every allocation was freed");
        }
    }
}

/// Says why a test did nothing on hardware.
fn skipped_on_hardware(why: &str) {
    eprintln!("skipped on hardware: {why}");
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

/// Whether a stream's operations table is the runtime `b`, the same instance.
fn same_runtime(a: &Arc<dyn StreamRuntime>, b: &Arc<dyn DeviceRuntime>) -> bool {
    std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
}

fn streams_carry_their_runtime(p: &'static Platform) {
    let u = Under::new(p);
    let dev = p.dev(0);
    let created = u.rt.create_stream(dev).unwrap();
    let streams = [
        u.rt.default_stream(dev).unwrap(),
        u.rt.stream(dev, StreamSentinel::PerThreadDefault).unwrap(),
        u.rt.wrap_stream(dev, created.handle()).unwrap(),
        u.rt.consumer_stream(dev, Some(-1))
            .unwrap()
            .unwrap_or_else(|| created.clone()),
        created,
    ];
    for stream in &streams {
        assert!(
            same_runtime(&stream.runtime().unwrap(), &u.rt),
            "{stream:?}"
        );
    }
    // A buffer's copies go to its stream's runtime: here the one opened
    // from a path, not the process-wide one `runtime_for` would load.
    let mr = u.rt.default_resource(dev).unwrap();
    let buffer = devmm::DeviceBuffer::new(4, mr, &streams[4]).unwrap();
    // SAFETY: the resource hands out real (fake-driver host) memory.
    unsafe { buffer.copy_from_host(b"abcd") }.unwrap();
    let mut back = [0u8; 4];
    // SAFETY: as above.
    unsafe { buffer.copy_to_host(&mut back) }.unwrap();
    assert_eq!(&back, b"abcd");
    if let Some(fake) = u.fake() {
        let copies = fake.call_count(&p.call("MemcpyAsync"));
        assert_eq!(copies, 2, "both copies went through the stream's runtime");
    }
    // Host memory ordered on a GPU stream has no memcpy in that runtime.
    let malloc = Arc::new(devmm::MallocMemoryResource::new());
    let host = devmm::DeviceBuffer::new(4, malloc, &streams[4]).unwrap();
    // SAFETY: malloc memory is real host memory.
    let err = unsafe { host.copy_from_host(b"abcd") }.unwrap_err();
    assert!(matches!(err, Error::Stream { .. }), "{err}");
    assert!(err.to_string().contains("does not serve cpu:0"), "{err}");
}

fn device_count_and_memory_info(p: &'static Platform) {
    let u = Under::new(p);
    let rt = &u.rt;
    let count = rt.device_count().unwrap();
    let devices: Vec<Device> = (0..count)
        .map(|i| p.dev(u32::try_from(i).unwrap()))
        .collect();
    assert_eq!(rt.devices().unwrap(), devices);
    let dev = u.second();
    if let Some(fake) = u.fake() {
        assert_eq!(count, 2);
        assert_eq!(fake.set_memory_limit(1, 1 << 20), 0);
        let info = rt.memory_info(dev).unwrap();
        assert_eq!((info.free, info.total), (1 << 20, 1 << 20));
    } else {
        assert!(count >= 1, "a GPU machine has a GPU");
    }
    let before = rt.memory_info(dev).unwrap();
    assert!(before.free <= before.total && before.total > 0);
    let mr = rt.default_resource(dev).unwrap();
    let stream = rt.default_stream(dev).unwrap();
    let ptr = mr.allocate(4096, &stream).unwrap();
    if u.fake().is_some() {
        assert_eq!(rt.memory_info(dev).unwrap().free, (1 << 20) - 4096);
        assert_eq!(mr.available_memory().unwrap().free, (1 << 20) - 4096);
    }
    // SAFETY: allocated above with this size, freed once.
    unsafe { mr.deallocate(ptr, 4096, &stream).unwrap() };
    u.assert_no_leaks();

    let missing = p.dev(u32::try_from(count).unwrap());
    let err = rt.memory_info(missing).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
    assert!(
        err.to_string()
            .contains(&format!("{missing} does not exist")),
        "{err}"
    );
    if let Some(fake) = u.fake() {
        // The count is read once, at load: a runtime loaded after the change sees it.
        assert_eq!(fake.set_device_count(3), 0);
        assert_eq!(rt.device_count().unwrap(), 2);
        let reopened = (p.load)(u.fake_path()).unwrap();
        assert_eq!(reopened.device_count().unwrap(), 3);
        // A library that finds no device (`*GetDeviceCount` answers
        // no-device, as Debian's HIP does without /dev/kfd) cannot run
        // anything here: the runtime is unavailable, and says why.
        assert_eq!(fake.set_device_count(0), 0);
        let Err(Error::RuntimeUnavailable { name, reason }) = (p.load)(u.fake_path()) else {
            panic!("a runtime without a device loaded as available");
        };
        assert_eq!(name, p.runtime);
        let no_device = format!("{}ErrorNoDevice (100)", p.prefix);
        assert!(reason.contains(&no_device), "{reason}");
        assert!(reason.contains("no device"), "{reason}");
        assert_eq!(
            fake.last_error(),
            0,
            "the no-device status is not left behind"
        );
    }
}

fn activation_guard_restores_the_previous_device(p: &'static Platform) {
    let u = Under::new(p);
    let rt = &u.rt;
    assert!(rt.activate(Device::CPU).is_err());
    let Some(fake) = u.fake() else {
        // The current device is driver state devmm does not expose: on
        // hardware, check that nested guards work and leave no error.
        let _outer = rt.activate(u.second()).unwrap();
        let _inner = rt.activate(p.dev(0)).unwrap();
        return;
    };
    let set = p.call("SetDevice");
    {
        let _outer = rt.activate(p.dev(1)).unwrap();
        assert_eq!(log_of(fake, &set).len(), 1);
        assert_eq!(field(&log_of(fake, &set)[0], "device"), "1");
        {
            let _inner = rt.activate(p.dev(0)).unwrap();
            assert_eq!(field(log_of(fake, &set).last().unwrap(), "device"), "0");
        }
        assert_eq!(field(log_of(fake, &set).last().unwrap(), "device"), "1");
        // Already active: no call.
        let _same = rt.activate(p.dev(1)).unwrap();
        assert_eq!(log_of(fake, &set).len(), 3);
    }
    let lines = log_of(fake, &set);
    assert_eq!(lines.len(), 4);
    assert_eq!(
        field(&lines[3], "device"),
        "0",
        "the guard restores device 0"
    );
}

/// A device the caller made current itself, with nothing run on it yet, is
/// current again after devmm used another: on CUDA setting it created its
/// context; on HIP a device is inactive until it runs something, and
/// making it current again costs nothing, so the guard always restores.
fn the_callers_device_is_current_again_after_devmm_used_another(p: &'static Platform) {
    let u = Under::new(p);
    let Some(fake) = u.fake() else {
        return skipped_on_hardware("calls the fake's own SetDevice and GetDevice");
    };
    type SetDevice = unsafe extern "C" fn(c_int) -> c_int;
    type GetDevice = unsafe extern "C" fn(*mut c_int) -> c_int;
    // SAFETY: the runtime's `*SetDevice(int)` and `*GetDevice(int*)`.
    let (set, get) = unsafe {
        (
            fake.function::<SetDevice>(&p.call("SetDevice")),
            fake.function::<GetDevice>(&p.call("GetDevice")),
        )
    };
    let rt = &u.rt;
    std::thread::scope(|scope| {
        scope.spawn(|| {
            // SAFETY: a plain call with a valid ordinal.
            assert_eq!(unsafe { set(1) }, 0);
            let mr = rt.default_resource(p.dev(0)).unwrap();
            let stream = rt.default_stream(p.dev(0)).unwrap();
            let ptr = mr.allocate(64, &stream).unwrap();
            // SAFETY: allocated just above, freed once.
            unsafe { mr.deallocate(ptr, 64, &stream) }.unwrap();
            stream.synchronize().unwrap();
            let mut current = -1;
            // SAFETY: `current` is valid for the write.
            assert_eq!(unsafe { get(&mut current) }, 0);
            assert_eq!(
                current, 1,
                "devmm left the caller's thread on another device"
            );
        });
    });
}

fn streams_created_wrapped_and_builtin(p: &'static Platform) {
    let u = Under::new(p);
    let rt = &u.rt;
    let dev = u.second();
    let stream = rt.create_stream(dev).unwrap();
    assert!(stream.is_owned());
    assert_ne!(stream.handle(), 0);
    stream.synchronize().unwrap();
    if let Some(fake) = u.fake() {
        let created = log_of(fake, &p.call("StreamCreateWithFlags"));
        assert_eq!(created.len(), 1);
        assert_eq!(field(&created[0], "device"), "1", "created on its device");
        let synced = log_of(fake, &p.call("StreamSynchronize"));
        assert_eq!(field(&synced[0], "stream"), hex(stream.handle()));
    }

    let handle = stream.handle();
    let clone = stream.clone();
    drop(stream);
    let destroys = || u.fake().map(|f| f.call_count(&p.call("StreamDestroy")));
    assert!(matches!(destroys(), None | Some(0)), "a clone still lives");
    drop(clone);
    if let Some(fake) = u.fake() {
        let destroyed = log_of(fake, &p.call("StreamDestroy"));
        assert_eq!(destroyed.len(), 1);
        assert_eq!(field(&destroyed[0], "stream"), hex(handle));
        assert!(destroyed[0].ends_with("-> 0"), "{destroyed:?}");
    }

    let owned_elsewhere = rt.create_stream(dev).unwrap();
    let wrapped = rt.wrap_stream(dev, owned_elsewhere.handle()).unwrap();
    assert!(!wrapped.is_owned());
    wrapped.synchronize().unwrap();
    drop(wrapped);
    assert!(
        matches!(destroys(), None | Some(1)),
        "wrapped streams are not destroyed"
    );
    drop(owned_elsewhere);
    assert!(matches!(destroys(), None | Some(2)));

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

fn stream_flags_reach_the_driver(p: &'static Platform) {
    let u = Under::new(p);
    let dev = u.second();
    let blocking = u.rt.create_stream(dev).unwrap();
    let non_blocking =
        u.rt.create_stream_with_flags(dev, devmm::StreamFlags::NonBlocking)
            .unwrap();
    assert!(non_blocking.is_owned());
    assert_ne!(non_blocking.handle(), blocking.handle());
    if let Some(fake) = u.fake() {
        let created = log_of(fake, &p.call("StreamCreateWithFlags"));
        let flags: Vec<&str> = created.iter().map(|l| field(l, "flags")).collect();
        assert_eq!(flags, ["0", "1"], "{created:?}");
    }
}

/// Copies `data` in and out of `ptr` and checks it came back.
fn round_trip(rt: &dyn DeviceRuntime, ptr: devmm::DevicePtr, data: &[u8], stream: &devmm::Stream) {
    let mut back = vec![0u8; data.len()];
    // SAFETY: callers pass a live allocation of at least `data.len()` bytes.
    unsafe {
        rt.copy_host_to_device(ptr, data, stream).unwrap();
        rt.copy_device_to_host(&mut back, ptr, stream).unwrap();
    }
    assert_eq!(back, data);
}

fn memcpy_of_every_kind(p: &'static Platform) {
    let u = Under::new(p);
    let rt = &u.rt;
    let dev = u.second();
    let stream = rt.create_stream(dev).unwrap();
    let mr = rt.default_resource(dev).unwrap();
    let data: Vec<u8> = (0..=255).collect();
    let a = mr.allocate(256, &stream).unwrap();
    let b = mr.allocate(256, &stream).unwrap();
    if let Some(fake) = u.fake() {
        fake.clear_calls();
    }
    // SAFETY: `a` and `b` are live 256-byte allocations of `dev`.
    unsafe {
        rt.copy_host_to_device(a, &data, &stream).unwrap();
        rt.copy_device_to_device(b, a, 256, &stream).unwrap();
    }
    let mut back = vec![0u8; 256];
    // SAFETY: as above.
    unsafe { rt.copy_device_to_host(&mut back, b, &stream).unwrap() };
    assert_eq!(back, data);
    // SAFETY: empty copies touch nothing.
    unsafe { rt.copy_host_to_device(a, &[], &stream).unwrap() };
    if let Some(fake) = u.fake() {
        let copies = log_of(fake, &p.call("MemcpyAsync"));
        let kinds: Vec<&str> = copies.iter().map(|l| field(l, "kind")).collect();
        assert_eq!(
            kinds,
            ["1", "3", "2"],
            "host-to-device, device-to-device, device-to-host; empty copies make no call"
        );
        assert!(
            copies
                .iter()
                .all(|l| field(l, "stream") == hex(stream.handle()))
        );
    }

    // Pinned and managed memory: the driver infers the direction (kind 4).
    for ty in [p.host, p.managed] {
        let dev = Device::new(ty, 0);
        let mr = rt.default_resource(dev).unwrap();
        let s = rt.default_stream(dev).unwrap();
        let ptr = mr.allocate(256, &s).unwrap();
        if let Some(fake) = u.fake() {
            fake.clear_calls();
        }
        round_trip(&**rt, ptr, &data, &s);
        if let Some(fake) = u.fake() {
            let kinds: Vec<String> = log_of(fake, &p.call("MemcpyAsync"))
                .iter()
                .map(|l| field(l, "kind").to_owned())
                .collect();
            let expected = if ty == p.device {
                ["1", "2"]
            } else {
                ["4", "4"]
            };
            assert_eq!(kinds, expected, "{ty}");
        }
        // SAFETY: allocated above, freed once.
        unsafe { mr.deallocate(ptr, 256, &s).unwrap() };
    }
    // SAFETY: allocated above, freed once.
    unsafe {
        mr.deallocate(a, 256, &stream).unwrap();
        mr.deallocate(b, 256, &stream).unwrap();
    }
    u.assert_no_leaks();
}

/// A host address for the runtime's raw copy.
fn host(bytes: &mut [u8]) -> devmm::DevicePtr {
    devmm::DevicePtr::from_host_ptr(bytes.as_mut_ptr())
}

/// The seed's `memcpy`: each kind reaches the driver as it is, and every
/// copy touching host memory is synchronized before it returns.
fn raw_memcpy_of_every_kind(p: &'static Platform) {
    use devmm::CopyKind::{Default, DeviceToDevice, DeviceToHost, HostToDevice, HostToHost};
    let u = Under::new(p);
    let rt = &u.rt;
    let dev = u.second();
    let stream = rt.create_stream(dev).unwrap();
    let mr = rt.default_resource(dev).unwrap();
    let (a, b) = (
        mr.allocate(256, &stream).unwrap(),
        mr.allocate(256, &stream).unwrap(),
    );
    let mut data: Vec<u8> = (0..=255).collect();
    let (mut back, mut again, mut copy) = (vec![0u8; 256], vec![0u8; 256], vec![0u8; 256]);
    if let Some(fake) = u.fake() {
        fake.clear_calls();
    }
    // SAFETY: `a` and `b` are live 256-byte allocations of `dev`; the host
    // vectors hold 256 bytes each.
    unsafe {
        rt.memcpy(a, host(&mut data), 256, HostToDevice, &stream)
            .unwrap();
        rt.memcpy(b, a, 256, DeviceToDevice, &stream).unwrap();
        rt.memcpy(host(&mut back), b, 256, DeviceToHost, &stream)
            .unwrap();
        rt.memcpy(host(&mut copy), host(&mut back), 256, HostToHost, &stream)
            .unwrap();
        rt.memcpy(host(&mut again), a, 256, Default, &stream)
            .unwrap();
        // Zero bytes touch nothing: no call, null addresses included.
        rt.memcpy(
            devmm::DevicePtr::NULL,
            devmm::DevicePtr::NULL,
            0,
            Default,
            &stream,
        )
        .unwrap();
    }
    assert_eq!((&back, &copy, &again), (&data, &data, &data));
    if let Some(fake) = u.fake() {
        let log: Vec<String> = fake
            .call_log()
            .into_iter()
            .filter(|l| {
                l.starts_with(&p.call("MemcpyAsync")) || l.starts_with(&p.call("StreamSynchronize"))
            })
            .map(|l| match l.split(' ').next() {
                Some(name) if name.ends_with("MemcpyAsync") => {
                    format!("copy {}", field(&l, "kind"))
                }
                _ => "sync".to_owned(),
            })
            .collect();
        assert_eq!(
            log,
            [
                "copy 1", "sync", "copy 3", "copy 2", "sync", "copy 0", "sync", "copy 4", "sync"
            ],
            "device to device stays ordered on the stream; the rest is synchronized"
        );
    }
    // Overlapping host ranges move as memmove does (the driver's copies
    // may not overlap): on the host, after the stream's work.
    let mut line: Vec<u8> = (0..16).collect();
    let start = host(&mut line);
    let later = devmm::DevicePtr::from_addr(start.addr() + 4);
    // SAFETY: both ranges lie in `line`, 16 bytes of host memory.
    unsafe { rt.memcpy(later, start, 8, HostToHost, &stream) }.unwrap();
    assert_eq!(line[4..12], [0, 1, 2, 3, 4, 5, 6, 7]);
    // SAFETY: allocated above, freed once.
    unsafe {
        mr.deallocate(a, 256, &stream).unwrap();
        mr.deallocate(b, 256, &stream).unwrap();
    }
    u.assert_no_leaks();
}

/// Bad addresses and kinds are refused: by the core before any driver call
/// (null, past the address space, a stream of another runtime, the inferred
/// direction without unified addressing), and by the driver when a kind
/// does not match the memory.
fn raw_memcpy_refusals(p: &'static Platform) {
    use devmm::CopyKind::{Default, HostToDevice, HostToHost};
    let u = Under::new(p);
    let Some(fake) = u.fake() else {
        return skipped_on_hardware("needs the fake's unified-addressing switch");
    };
    let rt = &u.rt;
    let dev = p.dev(1);
    let stream = rt.create_stream(dev).unwrap();
    let mr = rt.default_resource(dev).unwrap();
    let a = mr.allocate(64, &stream).unwrap();
    let mut bytes = vec![7u8; 64];
    let mut other = vec![0u8; 64];
    fake.clear_calls();
    let invalid = |err: Error, what: &str| match err {
        Error::InvalidArgument { reason } => assert!(reason.contains(what), "{reason}"),
        other => panic!("expected an invalid argument ({what}), got {other:?}"),
    };
    // SAFETY: every call below is refused before memory is touched, or the
    // driver checks the addresses against its allocations.
    unsafe {
        let top = devmm::DevicePtr::from_addr(usize::MAX - 8);
        invalid(
            rt.memcpy(a, devmm::DevicePtr::NULL, 8, HostToDevice, &stream)
                .unwrap_err(),
            "src null",
        );
        invalid(
            rt.memcpy(top, host(&mut bytes), 64, HostToHost, &stream)
                .unwrap_err(),
            "past the end",
        );
        invalid(
            rt.memcpy(a, host(&mut bytes), 64, HostToDevice, &devmm::Stream::cpu())
                .unwrap_err(),
            "does not serve cpu:0",
        );
        assert_eq!(fake.call_count(&p.call("MemcpyAsync")), 0);
        // A host address named as device memory, device memory named as host.
        for (dst, src, kind) in [
            (host(&mut other), host(&mut bytes), HostToDevice),
            (a, host(&mut bytes), HostToHost),
        ] {
            match rt.memcpy(dst, src, 64, kind, &stream).unwrap_err() {
                Error::Driver { source, device } => {
                    assert_eq!(
                        (source.call, source.code, device),
                        (p.call("MemcpyAsync").as_str(), 1, Some(dev))
                    );
                }
                other => panic!("expected a driver error for {kind:?}, got {other:?}"),
            }
        }
    }
    assert_eq!(other, vec![0u8; 64]);
    // SAFETY: allocated above, freed once.
    unsafe { mr.deallocate(a, 64, &stream).unwrap() };

    // Without unified addressing the driver cannot infer a direction: a
    // fresh runtime (the answer is asked once per device) refuses it.
    assert_eq!(fake.set_unified_addressing(1, false), 0);
    let fresh = (p.load)(u.fake_path()).unwrap();
    let stream = fresh.create_stream(dev).unwrap();
    fake.clear_calls();
    // SAFETY: refused before memory is touched.
    let err = unsafe { fresh.memcpy(host(&mut other), host(&mut bytes), 64, Default, &stream) }
        .unwrap_err();
    invalid(err, "has no unified addressing");
    assert_eq!(fake.call_count(&p.call("MemcpyAsync")), 0);
    u.assert_no_leaks();
}

fn resource_contract(p: &'static Platform) {
    let u = Under::new(p);
    let rt = &u.rt;
    let devices = [
        u.second(),
        Device::new(p.host, 0),
        Device::new(p.managed, 0),
    ];
    for dev in devices {
        let mr = rt.default_resource(dev).unwrap();
        let stream = rt.create_stream(dev).unwrap();
        assert_eq!(mr.device(), dev);
        // It says which shipped resource it is, and that is the name its
        // chain gives it (what a binding picks the object's class by).
        let shipped = mr
            .shipped()
            .expect("a runtime's default is a shipped resource");
        let chain = devmm::resource_chain(&*mr);
        assert!(
            chain.starts_with(&format!("{shipped}(")),
            "{shipped}: {chain}"
        );
        assert!(
            mr.allocate(0, &stream).unwrap().is_null(),
            "zero bytes: null"
        );
        let sizes = [1usize, 255, 256, 257, 4097, 1 << 20];
        let ptrs: Vec<_> = sizes
            .iter()
            .map(|&n| mr.allocate(n, &stream).unwrap())
            .collect();
        for (i, (&n, &ptr)) in sizes.iter().zip(&ptrs).enumerate() {
            assert!(
                ptr.is_aligned(mr.guaranteed_alignment()),
                "{dev}: {ptr} for {n} bytes"
            );
            let fill = vec![u8::try_from(i + 1).unwrap(); n];
            // SAFETY: `ptr` is a live allocation of `n` bytes.
            unsafe { rt.copy_host_to_device(ptr, &fill, &stream).unwrap() };
        }
        // No allocation overlaps another: each still holds its own bytes.
        for (i, (&n, &ptr)) in sizes.iter().zip(&ptrs).enumerate() {
            let mut back = vec![0u8; n];
            // SAFETY: as above.
            unsafe { rt.copy_device_to_host(&mut back, ptr, &stream).unwrap() };
            assert!(
                back.iter().all(|&b| usize::from(b) == i + 1),
                "{dev}: allocation {i} was overwritten"
            );
        }
        for (&n, &ptr) in sizes.iter().zip(&ptrs) {
            // SAFETY: allocated above with this size, freed once.
            unsafe { mr.deallocate(ptr, n, &stream).unwrap() };
        }
        stream.synchronize().unwrap();
    }
    u.assert_no_leaks();
}

/// The contract suite of `devmm::testing` on every GPU resource, copying
/// bytes and making streams through the runtime under test.
fn conformance_suite(p: &'static Platform) {
    let u = Under::new(p);
    let rt = &u.rt;
    let (write_rt, read_rt, stream_rt) = (Arc::clone(rt), Arc::clone(rt), Arc::clone(rt));
    let options = MrConformanceOptions::new()
        .stream_factory(move |device| stream_rt.create_stream(device))
        .write(move |dst, src, stream| {
            // SAFETY: mr_conformance passes allocations with room for `src`.
            unsafe { write_rt.copy_host_to_device(dst, src, stream) }
        })
        .read(move |dst, src, stream| {
            // SAFETY: mr_conformance passes allocations with room for `dst`.
            unsafe { read_rt.copy_device_to_host(dst, src, stream) }
        });
    for dev in [
        u.second(),
        Device::new(p.host, 0),
        Device::new(p.managed, 0),
    ] {
        let report = mr_conformance(|| rt.default_resource(dev), &options);
        assert!(report.is_ok(), "{report}");
    }
    let report = mr_conformance(
        || (p.managed_resource)(u.fake_path(), Device::new(p.managed, 0)),
        &options,
    );
    assert!(report.is_ok(), "{report}");
    u.assert_no_leaks();
}

fn out_of_memory_names_device_size_and_chain(p: &'static Platform) {
    let u = Under::new(p);
    let rt = &u.rt;
    let dev = u.second();
    if let Some(fake) = u.fake() {
        assert_eq!(fake.set_memory_limit(1, 1 << 20), 0);
    }
    let too_much = rt.memory_info(dev).unwrap().total.saturating_mul(2);
    let device_mr = rt.default_resource(dev).unwrap();
    let ordered = device_mr.stream_ordered();
    let mr = StatisticsAdaptor::new(device_mr);
    let stream = rt.default_stream(dev).unwrap();
    let err = mr.allocate(too_much, &stream).unwrap_err();
    let suffix = if ordered { ", stream_ordered=true" } else { "" };
    let chain = format!(
        "StatisticsAdaptor -> {}(device={dev}, alignment=256{suffix})",
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
                (dev, too_much, chain.as_str())
            );
        }
        other => panic!("expected out of memory, got {other:?}"),
    }
    let malloc = p.call(if ordered { "MallocAsync" } else { "Malloc" });
    let text = err.to_string();
    let head = format!(
        "out of memory: failed to allocate {too_much} bytes on {dev} through {chain} ({malloc} failed on {dev} with {} (2): ",
        p.oom_name
    );
    assert!(text.starts_with(&head), "{text}");
    assert!(
        text.ends_with("); free buffers you no longer need, or allocate less"),
        "{text}"
    );
    if u.fake().is_some() {
        assert!(text.contains("(2): out of memory)"), "{text}");
    }
    assert!(err.is_out_of_memory());
    assert_eq!(mr.statistics().current_bytes, 0);
}

fn stream_handoff_records_then_waits(p: &'static Platform) {
    let u = Under::new(p);
    let rt = &u.rt;
    let dev = u.second();
    let producer = rt.create_stream(dev).unwrap();
    let theirs = rt.create_stream(dev).unwrap();
    let consumer = rt
        .consumer_stream(dev, Some(i64::try_from(theirs.handle()).unwrap()))
        .unwrap()
        .expect("a stream handle means: synchronize");
    assert!(!consumer.is_owned());
    if let Some(fake) = u.fake() {
        fake.clear_calls();
    }
    consumer.wait(&producer).unwrap();
    consumer.synchronize().unwrap();
    if let Some(fake) = u.fake() {
        let log = fake.call_log();
        let names: Vec<&str> = log.iter().map(|l| l.split(' ').next().unwrap()).collect();
        let wanted = ["EventCreateWithFlags", "EventRecord", "StreamWaitEvent"].map(|s| p.call(s));
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
            "create, record, wait in order: {log:?}"
        );
        assert_eq!(
            fake.call_count(&p.call("EventDestroy")),
            0,
            "the event is kept"
        );
        let event = field(&log[order[0]], "event");
        let (record, wait) = (&log[order[1]], &log[order[2]]);
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
        // The next hand-off records the same event again.
        consumer.wait(&producer).unwrap();
        assert_eq!(fake.call_count(&p.call("EventCreateWithFlags")), 1);
        assert_eq!(fake.call_count(&p.call("EventRecord")), 2);
    }

    // -1: the consumer asked for no synchronization.
    assert!(rt.consumer_stream(dev, Some(-1)).unwrap().is_none());
    // A stream never waits on itself.
    if let Some(fake) = u.fake() {
        fake.clear_calls();
    }
    producer.wait(&producer).unwrap();
    if let Some(fake) = u.fake() {
        assert!(fake.call_log().is_empty());
    }
}

fn driver_errors_name_call_code_and_device(p: &'static Platform) {
    let u = Under::new(p);
    let Some(fake) = u.fake() else {
        return skipped_on_hardware("needs failure injection");
    };
    let dev = p.dev(1);
    let stream = u.rt.create_stream(dev).unwrap();
    let (code, name) = p.invalid_handle;
    assert_eq!(fake.fail_next(&p.call("StreamSynchronize"), code), 0);
    let err = stream.synchronize().unwrap_err();
    match &err {
        Error::Driver { device, source } => {
            assert_eq!(source.call, p.call("StreamSynchronize"));
            assert_eq!(
                (source.code, source.name.as_str(), *device),
                (code, name, Some(dev))
            );
            // The driver's error is kept as the source.
            let source = std::error::Error::source(&err).expect("a source");
            assert!(source.to_string().starts_with(&format!(
                "{}StreamSynchronize returned {name} (400): ",
                p.prefix
            )));
        }
        other => panic!("expected a driver error, got {other:?}"),
    }
    let head = format!(
        "{}StreamSynchronize failed on {dev} with {name} (400): ",
        p.prefix
    );
    assert!(err.to_string().starts_with(&head), "{err}");
    stream.synchronize().unwrap();
}

fn stream_ordered_allocation_when_present(p: &'static Platform) {
    let u = Under::new(p);
    let rt = &u.rt;
    let dev = p.dev(0);
    let mr = rt.default_resource(dev).unwrap();
    assert!(
        Arc::ptr_eq(&mr, &rt.default_resource(dev).unwrap()),
        "one default per device"
    );
    assert_eq!(mr.guaranteed_alignment(), 256);
    if u.fake().is_none() && !mr.stream_ordered() {
        return skipped_on_hardware("the driver has no stream-ordered allocator");
    }
    assert!(mr.stream_ordered());
    assert_eq!(
        format!("{mr:?}"),
        format!(
            "{}(device={dev}, alignment=256, stream_ordered=true)",
            p.device_mr
        )
    );
    let stream = rt.create_stream(dev).unwrap();
    if let Some(fake) = u.fake() {
        fake.clear_calls();
    }
    let ptr = mr.allocate(1000, &stream).unwrap();
    assert!(ptr.is_aligned(256));
    round_trip(&**rt, ptr, &[9; 1000], &stream);
    // SAFETY: allocated above, freed once.
    unsafe { mr.deallocate(ptr, 1000, &stream).unwrap() };
    stream.synchronize().unwrap();
    if let Some(fake) = u.fake() {
        let alloc = log_of(fake, &p.call("MallocAsync"));
        let free = log_of(fake, &p.call("FreeAsync"));
        assert_eq!((alloc.len(), free.len()), (1, 1));
        assert_eq!(field(&alloc[0], "stream"), hex(stream.handle()));
        assert_eq!(field(&free[0], "stream"), hex(stream.handle()));
        assert_eq!(fake.call_count(&p.call("Malloc")), 0);
    }
    // A stream of another device is refused by a stream-ordered resource.
    if rt.device_count().unwrap() > 1 {
        let other = rt.default_stream(p.dev(1)).unwrap();
        assert!(matches!(mr.allocate(8, &other), Err(Error::Refused { .. })));
    }
    u.assert_no_leaks();
}

fn synchronous_allocation_without_async_symbols(p: &'static Platform) {
    if p.on_hardware() {
        return skipped_on_hardware("needs a driver without the stream-ordered allocator");
    }
    let u = Under::with_library(p, p.fake_sync);
    let fake = u.fake().expect("a fake");
    let dev = p.dev(0);
    let mr = u.rt.default_resource(dev).unwrap();
    assert!(!mr.stream_ordered());
    assert_eq!(
        format!("{mr:?}"),
        format!("{}(device={dev}, alignment=256)", p.device_mr)
    );
    let stream = u.rt.default_stream(dev).unwrap();
    let ptr = mr.allocate(1000, &stream).unwrap();
    // SAFETY: allocated above, freed once.
    unsafe { mr.deallocate(ptr, 1000, &stream).unwrap() };
    assert_eq!(
        (
            fake.call_count(&p.call("Malloc")),
            fake.call_count(&p.call("Free"))
        ),
        (1, 1)
    );
    u.assert_no_leaks();
}

fn pinned_and_managed_resources(p: &'static Platform) {
    let u = Under::new(p);
    let rt = &u.rt;
    let host = Device::new(p.host, 0);
    let pinned = rt.default_resource(host).unwrap();
    // Over a pool of pinned host memory (the fake CUDA runtime is 12.4,
    // which has them), the resource is stream-ordered and says so.
    let pool = if pinned.stream_ordered() {
        ", host_pool=true"
    } else {
        ""
    };
    assert_eq!(
        format!("{pinned:?}"),
        format!("{}(device={host}, alignment=256{pool})", p.pinned_mr)
    );
    let s = rt.default_stream(host).unwrap();
    let ptr = pinned.allocate(100, &s).unwrap();
    // Pinned memory is host memory: the host may touch it.
    // SAFETY: `ptr` is a live, host-accessible 100-byte allocation.
    unsafe { ptr.as_host_ptr::<u8>().write_bytes(7, 100) };
    // SAFETY: as above.
    assert_eq!(unsafe { ptr.as_host_ptr::<u8>().add(99).read() }, 7);
    // SAFETY: allocated above, freed once.
    unsafe { pinned.deallocate(ptr, 100, &s).unwrap() };
    if let Some(fake) = u.fake() {
        // HIP has no pools of pinned host memory.
        let pooled = p.runtime == "cuda";
        assert_eq!(pinned.stream_ordered(), pooled);
        let synchronous = if pooled { (0, 0) } else { (1, 1) };
        assert_eq!(
            (fake.call_count(p.host_malloc), fake.call_count(p.host_free)),
            synchronous
        );
    }
    assert!(pinned.available_memory().unwrap().total > 0);

    let managed_dev = Device::new(p.managed, u.second().index());
    let managed = (p.managed_resource)(u.fake_path(), managed_dev).unwrap();
    assert_eq!(
        format!("{managed:?}"),
        format!("{}(device={managed_dev}, alignment=256)", p.managed_mr)
    );
    let s = rt.default_stream(managed_dev).unwrap();
    if let Some(fake) = u.fake() {
        fake.clear_calls();
    }
    let ptr = managed.allocate(100, &s).unwrap();
    round_trip(&**rt, ptr, &[3; 100], &s);
    // SAFETY: allocated above, freed once.
    unsafe { managed.deallocate(ptr, 100, &s).unwrap() };
    if let Some(fake) = u.fake() {
        let alloc = log_of(fake, &p.call("MallocManaged"));
        assert_eq!(alloc.len(), 1);
        assert_eq!(field(&alloc[0], "flags"), "1", "attached globally");
        assert_eq!(
            field(&alloc[0], "device"),
            "1",
            "allocated with its device active"
        );
        assert_eq!(fake.call_count(&p.call("Free")), 1);
    }
    u.assert_no_leaks();
}

/// What the fake recorded for a managed range (`*MemRangeGetAttribute`):
/// `slots` ints of `attribute` (read-mostly 1, preferred location 2,
/// accessed-by 3, last prefetch location 4).
fn range_attribute(
    fake: &FakeControl,
    p: &Platform,
    buffer: &DeviceBuffer,
    attribute: i32,
    slots: usize,
) -> Vec<i32> {
    type Get = unsafe extern "C" fn(
        *mut std::ffi::c_void,
        usize,
        i32,
        *const std::ffi::c_void,
        usize,
    ) -> i32;
    // SAFETY: the C signature of `cudaMemRangeGetAttribute` / `hipMemRangeGetAttribute`.
    let get = unsafe { fake.function::<Get>(&p.call("MemRangeGetAttribute")) };
    let mut values = vec![0i32; slots];
    // SAFETY: `values` holds `slots` ints; the range is the buffer's.
    let status = unsafe {
        get(
            values.as_mut_ptr().cast(),
            slots * 4,
            attribute,
            buffer.ptr().as_host_ptr::<std::ffi::c_void>(),
            buffer.nbytes(),
        )
    };
    assert_eq!(status, 0, "{}MemRangeGetAttribute({attribute})", p.prefix);
    values
}

/// Managed memory takes prefetches (to a device or the host) and advice,
/// through any adaptor; the driver records them per range. Other memory,
/// a target of another kind, and an absent device are refused with errors
/// naming the resource, the target or the driver call.
/// Pinned memory comes from a pool of pinned host memory where the runtime
/// has one (CUDA 12.2 on: a host NUMA node, CUDA 13 on: the host), else from
/// the synchronous pinned allocator; host-accessible and writable either way.
/// A typed host view of pinned memory waits for the buffer's stream: a
/// copy queued into it from the GPU is done before the host reads it (a
/// safe `as_slice` / `as_mut_slice` of memory the GPU still writes would be
/// a data race).
fn host_views_of_pinned_memory_wait_for_its_stream(p: &'static Platform) {
    let u = Under::new(p);
    let Some(fake) = u.fake() else {
        return skipped_on_hardware("sets the fake's stream delay");
    };
    let host = Device::new(p.host, 0);
    // Not a default stream: a copy there is not waited for.
    let host_stream = u.rt.create_stream(host).unwrap();
    let gpu_stream = u.rt.default_stream(p.dev(0)).unwrap();
    let on_gpu =
        DeviceBuffer::new(300, u.rt.default_resource(p.dev(0)).unwrap(), &gpu_stream).unwrap();
    let bytes: Vec<u8> = (0..300).map(|i| (i % 251) as u8).collect();
    // SAFETY: a 300-byte device buffer, copied from the host (waited for).
    unsafe { on_gpu.copy_from_host(&bytes) }.unwrap();
    let pinned =
        DeviceBuffer::new(300, u.rt.default_resource(host).unwrap(), &host_stream).unwrap();
    let layout = devmm::Layout::new(&[300], &[1], devmm::DType::UINT8, 1).unwrap();
    let mut t =
        devmm::Tensor::from_buffer(Arc::new(pinned), devmm::DType::UINT8, layout, 0).unwrap();
    fake.set_stream_delay(200_000);
    // Queued on the pinned buffer's stream, landing 200 ms later.
    // SAFETY: both live 300-byte allocations.
    unsafe { devmm::copy_device_to_ptr(on_gpu.ptr(), t.data_ptr(), 300, &host_stream) }.unwrap();
    // SAFETY: the copy above initialises every element; nothing else writes.
    let seen = unsafe { t.as_slice::<u8>() }.unwrap().to_vec();
    fake.set_stream_delay(0);
    assert_eq!(seen, bytes);
    // The mutable view waits too: nothing queued may land after a write.
    fake.set_stream_delay(200_000);
    // SAFETY: both live 300-byte allocations.
    unsafe { devmm::copy_device_to_ptr(on_gpu.ptr(), t.data_ptr(), 300, &host_stream) }.unwrap();
    t.as_mut_slice::<u8>().unwrap()[0].write(7);
    fake.set_stream_delay(0);
    // SAFETY: every element was written by the copies and the view.
    assert_eq!(unsafe { t.as_slice::<u8>() }.unwrap()[..2], [7, 1]);
    on_gpu.free(&gpu_stream).unwrap();
}

/// On a device without concurrent managed access
/// (`cudaDevAttrConcurrentManagedAccess` 0: older GPUs, Jetson, Windows),
/// the GPU has all managed memory to itself while any kernel runs, and a
/// host touch faults: a host view of managed memory waits for the whole
/// device, not only the buffer's stream. ROCm's managed memory has the
/// device's own type, which host views refuse, so this is CUDA's.
fn host_views_of_managed_memory_wait_for_the_device_without_concurrent_access(
    p: &'static Platform,
) {
    let u = Under::new(p);
    let Some(fake) = u.fake() else {
        return skipped_on_hardware("sets the fake's concurrent managed access and delay");
    };
    if p.managed == p.device {
        return;
    }
    let gpu = p.dev(0);
    let managed = Device::new(p.managed, 0);
    assert_eq!(fake.set_concurrent_managed_access(0, false), 0);
    // A stream of its own: synchronizing it waits for nothing else.
    let managed_stream =
        u.rt.create_stream_with_flags(managed, devmm::StreamFlags::NonBlocking)
            .unwrap();
    let managed_mr = (p.managed_resource)(u.fake_path(), managed).unwrap();
    let buffer = DeviceBuffer::new(64, managed_mr, &managed_stream).unwrap();
    let gpu_stream = u.rt.default_stream(gpu).unwrap();
    let source = DeviceBuffer::new(64, u.rt.default_resource(gpu).unwrap(), &gpu_stream).unwrap();
    let bytes: Vec<u8> = (1..=64).collect();
    // SAFETY: a 64-byte device buffer, copied from the host (waited for).
    unsafe { source.copy_from_host(&bytes) }.unwrap();
    let layout = devmm::Layout::new(&[64], &[1], devmm::DType::UINT8, 1).unwrap();
    let t = devmm::Tensor::from_buffer(Arc::new(buffer), devmm::DType::UINT8, layout, 0).unwrap();
    // SAFETY: zeroing the 64 bytes the host owns before any GPU work.
    unsafe { std::ptr::write_bytes(t.data_ptr().as_host_ptr::<u8>(), 0, 64) };
    // Work on another (non-blocking) stream of the device, landing 200 ms
    // later, as a kernel writes managed memory: the driver's asynchronous
    // copy (devmm's copies touching host-reachable memory wait first).
    let other =
        u.rt.create_stream_with_flags(gpu, devmm::StreamFlags::NonBlocking)
            .unwrap();
    type MemcpyAsync =
        unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int, *mut c_void) -> c_int;
    // SAFETY: the runtime's `*MemcpyAsync(dst, src, count, kind, stream)`.
    let memcpy_async = unsafe { fake.function::<MemcpyAsync>(&p.call("MemcpyAsync")) };
    let scratch = DeviceBuffer::new(64, u.rt.default_resource(gpu).unwrap(), &gpu_stream).unwrap();
    // Each job of the fake, a synchronization's too, waits 100 ms: the copy
    // into the managed memory lands after three others, the view's own
    // wait for its stream after one.
    fake.set_stream_delay(100_000);
    for dst in [scratch.ptr(), scratch.ptr(), scratch.ptr(), t.data_ptr()] {
        // SAFETY: live 64-byte allocations; kind 3 is device to device.
        let status = unsafe {
            memcpy_async(
                dst.as_host_ptr(),
                source.ptr().as_host_ptr(),
                64,
                3,
                std::ptr::without_provenance_mut(other.handle()),
            )
        };
        assert_eq!(status, 0);
    }
    // SAFETY: the last copy above writes every element; nothing else does.
    let seen = unsafe { t.as_slice::<u8>() }.unwrap().to_vec();
    fake.set_stream_delay(0);
    other.synchronize().unwrap();
    assert_eq!(
        seen, bytes,
        "the host touched managed memory while the device ran work"
    );
    source.free(&gpu_stream).unwrap();
}

/// A host consumer of pinned memory reads it as soon as it has the address:
/// NumPy's `from_dlpack` asks for no stream (`stream=None`), and
/// `__array_interface__` and the buffer protocol have no stream at all. The
/// export waits for the buffer's stream before it hands the address out,
/// as a typed host view does: a copy queued into the memory from the GPU
/// is done before the consumer reads.
fn host_consumers_of_pinned_memory_wait_for_its_stream(p: &'static Platform) {
    let u = Under::new(p);
    let Some(fake) = u.fake() else {
        return skipped_on_hardware("sets the fake's stream delay");
    };
    let host = Device::new(p.host, 0);
    // Not a default stream: a copy there is not waited for.
    let host_stream = u.rt.create_stream(host).unwrap();
    let gpu_stream = u.rt.default_stream(p.dev(0)).unwrap();
    let on_gpu =
        DeviceBuffer::new(64, u.rt.default_resource(p.dev(0)).unwrap(), &gpu_stream).unwrap();
    let bytes: Vec<u8> = (1..=64).collect();
    // SAFETY: a 64-byte device buffer, copied from the host (waited for).
    unsafe { on_gpu.copy_from_host(&bytes) }.unwrap();
    let pinned = DeviceBuffer::new(64, u.rt.default_resource(host).unwrap(), &host_stream).unwrap();
    let layout = devmm::Layout::new(&[64], &[1], devmm::DType::UINT8, 1).unwrap();
    let t = devmm::Tensor::from_buffer(Arc::new(pinned), devmm::DType::UINT8, layout, 0).unwrap();
    let read = |addr: usize| {
        // SAFETY: the tensor's 64 host-accessible bytes, alive through `t`.
        unsafe { std::slice::from_raw_parts(addr as *const u8, 64) }.to_vec()
    };
    let consumers: [(&str, &dyn Fn() -> usize); 2] = [
        ("a DLPack export asked for no stream", &|| {
            let export = t.to_dlpack(&devmm::dlpack::DlpackRequest::new()).unwrap();
            export.dl_tensor().data as usize
        }),
        ("__array_interface__", &|| {
            t.array_interface(devmm::ArrayInterfaceKind::Host)
                .unwrap()
                .data
                .0
        }),
    ];
    for (consumer, address) in consumers {
        // SAFETY: a zeroed 64-byte host-accessible buffer, nothing queued.
        unsafe { std::ptr::write_bytes(t.data_ptr().as_host_ptr::<u8>(), 0, 64) };
        fake.set_stream_delay(100_000);
        // Queued on the pinned buffer's stream, landing 100 ms later.
        // SAFETY: both live 64-byte allocations.
        unsafe { devmm::copy_device_to_ptr(on_gpu.ptr(), t.data_ptr(), 64, &host_stream) }.unwrap();
        let seen = read(address());
        fake.set_stream_delay(0);
        host_stream.synchronize().unwrap();
        assert_eq!(seen, bytes, "{consumer} read before the queued copy landed");
    }
    on_gpu.free(&gpu_stream).unwrap();
}

fn pinned_memory_from_a_host_pool_where_the_runtime_has_one(p: &'static Platform) {
    let u = Under::new(p);
    let Some(fake) = u.fake() else {
        return skipped_on_hardware("sets the fake's runtime version");
    };
    let host = Device::new(p.host, 0);
    // (runtime version, the pool's location type, if a pool is expected).
    let cases: [(i32, Option<&str>); 3] = [(12010, None), (12020, Some("3")), (13000, Some("2"))];
    for (version, location) in cases {
        fake.reset();
        fake.set_version(version, version);
        let rt = (p.load)(u.fake_path()).unwrap();
        fake.clear_calls();
        let pinned = rt.default_resource(host).unwrap();
        let expected = if p.runtime == "cuda" { location } else { None };
        let created = log_of(fake, &p.call("MemPoolCreate"));
        match expected {
            Some(location) => {
                assert_eq!(created.len(), 1, "{version}: {created:?}");
                assert!(created[0].ends_with(" -> 0"), "{created:?}");
                assert_eq!(field(&created[0], "location_type"), location);
            }
            None => assert!(created.is_empty(), "{version}: {created:?}"),
        }
        assert_eq!(pinned.stream_ordered(), expected.is_some(), "{version}");
        // Both a stream of the pinned device and one of the GPU order it.
        for stream in [
            rt.default_stream(host).unwrap(),
            rt.create_stream(p.dev(0)).unwrap(),
        ] {
            let ptr = pinned.allocate(300, &stream).unwrap();
            assert_eq!(ptr.addr() % 256, 0);
            stream.synchronize().unwrap();
            // Pinned memory is host memory: the host writes and reads it.
            // SAFETY: `ptr` is a live, host-accessible 300-byte allocation
            // whose stream has reached it.
            unsafe { ptr.as_host_ptr::<u8>().write_bytes(9, 300) };
            // SAFETY: as above.
            assert_eq!(unsafe { ptr.as_host_ptr::<u8>().add(299).read() }, 9);
            // The GPU reaches it too (a pool of host memory is the host's
            // alone until the devices are given access): into device
            // memory and back.
            let gpu = rt.default_resource(p.dev(0)).unwrap();
            let gpu_stream = rt.default_stream(p.dev(0)).unwrap();
            let on_gpu = gpu.allocate(300, &gpu_stream).unwrap();
            let mut back = [0u8; 300];
            // SAFETY: both live 300-byte allocations (the pinned one reached
            // by its stream above), ordered on `gpu_stream`, each copy waited
            // for; `back` holds 300 bytes.
            unsafe {
                let pinned_bytes = std::slice::from_raw_parts(ptr.as_host_ptr::<u8>(), 300);
                rt.copy_host_to_device(on_gpu, pinned_bytes, &gpu_stream)
                    .unwrap();
                rt.copy_device_to_host(&mut back, on_gpu, &gpu_stream)
                    .unwrap();
            }
            assert_eq!(back, [9; 300], "{version}");
            // SAFETY: allocated above, freed once.
            unsafe { gpu.deallocate(on_gpu, 300, &gpu_stream).unwrap() };
            gpu_stream.synchronize().unwrap();
            // SAFETY: allocated above, freed once.
            unsafe { pinned.deallocate(ptr, 300, &stream).unwrap() };
            stream.synchronize().unwrap();
        }
        let from_pool = fake.call_count(&p.call("MallocFromPoolAsync"));
        let synchronous = fake.call_count(p.host_malloc);
        let (pool_calls, host_calls) = if expected.is_some() { (2, 0) } else { (0, 2) };
        if expected.is_some() {
            // Pinning is slow (the driver locks every page): a freed block
            // stays reserved across synchronizations, as a caching host
            // allocator keeps it, instead of going back at the next one.
            let stream = rt.default_stream(host).unwrap();
            let ptr = pinned.allocate(1 << 20, &stream).unwrap();
            // SAFETY: allocated above, freed once.
            unsafe { pinned.deallocate(ptr, 1 << 20, &stream).unwrap() };
            stream.synchronize().unwrap();
            let figures = pinned.pool_statistics().unwrap().unwrap();
            assert!(
                figures.reserved_bytes >= 1 << 20,
                "{version}: the freed block went back at the synchronize: {figures:?}"
            );
            assert_eq!(figures.used_bytes, 0, "{version}: {figures:?}");
        }
        assert_eq!(
            (from_pool, synchronous),
            (pool_calls, host_calls),
            "{version}"
        );
        drop(pinned);
        drop(rt);
        assert_eq!(
            fake.live_allocations(),
            0,
            "{version}: every block was freed"
        );
    }
    // A driver that has host pools but refuses to make one (a system
    // without host NUMA pools) still pins, synchronously.
    fake.reset();
    let rt = (p.load)(u.fake_path()).unwrap();
    assert_eq!(fake.fail_next(&p.call("MemPoolCreate"), 801), 0);
    let pinned = rt.default_resource(host).unwrap();
    assert!(!pinned.stream_ordered(), "{pinned:?}");
    let s = rt.default_stream(host).unwrap();
    let ptr = pinned.allocate(64, &s).unwrap();
    // SAFETY: allocated above, freed once.
    unsafe { pinned.deallocate(ptr, 64, &s).unwrap() };
    assert_eq!(fake.call_count(p.host_malloc), 1);
    // Before CUDA 13 the pool lives on a host NUMA node: the one closest
    // to the GPU (`cudaDevAttrHostNumaId`), not a fixed node 0, which on a
    // two-socket machine may be the far one; a system without NUMA (-1)
    // pins through the synchronous allocator.
    if p.runtime == "cuda" {
        for (node, pool) in [(1, true), (-1, false)] {
            fake.reset();
            fake.set_version(12020, 12020);
            assert_eq!(fake.set_host_numa_id(0, node), 0);
            let rt = (p.load)(u.fake_path()).unwrap();
            fake.clear_calls();
            let pinned = rt.default_resource(host).unwrap();
            let created = log_of(fake, &p.call("MemPoolCreate"));
            assert_eq!(pinned.stream_ordered(), pool, "node {node}: {created:?}");
            if pool {
                assert_eq!(created.len(), 1, "{created:?}");
                assert_eq!(field(&created[0], "location_type"), "3");
                assert_eq!(field(&created[0], "device"), "1", "{created:?}");
            } else {
                assert!(created.is_empty(), "node {node}: {created:?}");
            }
        }
    }
    // A device that says it takes no host pools
    // (`cudaDevAttrHostMemoryPoolsSupported`) is not given one: a pool
    // made there would fail only at its first transfer.
    for version in [12020, 13000] {
        fake.reset();
        fake.set_version(version, version);
        assert_eq!(fake.set_pools(0, false), 0);
        let rt = (p.load)(u.fake_path()).unwrap();
        fake.clear_calls();
        let pinned = rt.default_resource(host).unwrap();
        assert!(!pinned.stream_ordered(), "{version}: {pinned:?}");
        assert_eq!(fake.call_count(&p.call("MemPoolCreate")), 0, "{version}");
    }
}

/// The pinned resource's host pool keeps its own figures: trimmed, its
/// high-water marks reset, as a device pool's are. Without a host pool (HIP,
/// whose pools take device locations only) there are no figures, and
/// trimming or resetting makes no driver call.
fn pinned_host_pool_trim_and_high_water_marks(p: &'static Platform) {
    let u = Under::new(p);
    let Some(fake) = u.fake() else {
        return skipped_on_hardware("sets the fake's runtime version");
    };
    fake.reset();
    fake.set_version(12020, 12020);
    let host = Device::new(p.host, 0);
    let pinned = (p.pinned)(u.fake_path(), host).unwrap();
    let rt = (p.load)(u.fake_path()).unwrap();
    let stream = rt.default_stream(host).unwrap();
    let ptr = pinned.allocate(1 << 20, &stream).unwrap();
    // SAFETY: allocated above, freed once.
    unsafe { pinned.deallocate(ptr, 1 << 20, &stream).unwrap() };
    stream.synchronize().unwrap();
    if !pinned.stream_ordered() {
        assert_eq!(p.runtime, "rocm", "CUDA 12.2 has host pools");
        assert!(pinned.pool_statistics().is_none(), "{pinned:?}");
        fake.clear_calls();
        pinned.trim_to(0);
        pinned.reset_high_water().unwrap();
        let pool_calls: Vec<String> = fake
            .call_log()
            .into_iter()
            .filter(|l| l.starts_with(&p.call("MemPool")))
            .collect();
        assert!(
            pool_calls.is_empty(),
            "nothing to trim or reset: {pool_calls:?}"
        );
        return;
    }
    let kept = pinned.figures();
    assert_eq!(kept.used_high_bytes, 1 << 20, "{kept:?}");
    assert!(kept.reserved_bytes >= 1 << 20, "{kept:?}");
    pinned.reset_high_water().unwrap();
    let reset = pinned.figures();
    assert_eq!(reset.used_high_bytes, 0, "{reset:?}");
    assert_eq!(reset.reserved_high_bytes, reset.reserved_bytes, "{reset:?}");
    pinned.trim_to(0);
    assert_eq!(pinned.figures().reserved_bytes, 0);
}

fn managed_memory_prefetch_and_advice(p: &'static Platform) {
    const LAST_PREFETCH: i32 = 4;
    const READ_MOSTLY: i32 = 1;
    const PREFERRED: i32 = 2;
    const ACCESSED_BY: i32 = 3;
    let u = Under::new(p);
    let rt = &u.rt;
    let managed_dev = Device::new(p.managed, 0);
    let managed = (p.managed_resource)(u.fake_path(), managed_dev).unwrap();
    // An adaptor answers for the managed resource below it.
    let counted: Arc<dyn MemoryResource> = Arc::new(StatisticsAdaptor::new(managed));
    let s = rt.default_stream(managed_dev).unwrap();
    let buffer = DeviceBuffer::new(8192, counted, &s).unwrap();

    devmm::prefetch(&buffer, Device::CPU, None).unwrap();
    if let Some(fake) = u.fake() {
        assert_eq!(range_attribute(fake, p, &buffer, LAST_PREFETCH, 1), [-1]);
        let call = log_of(fake, &p.call("MemPrefetchAsync"));
        assert_eq!(field(&call[0], "count"), "8192");
    }
    let second = u.second();
    let on_second = rt.create_stream(second).unwrap();
    devmm::prefetch(&buffer, second, Some(&on_second)).unwrap();
    on_second.synchronize().unwrap();
    if let Some(fake) = u.fake() {
        assert_eq!(range_attribute(fake, p, &buffer, LAST_PREFETCH, 1), [1]);
    }

    devmm::advise(&buffer, devmm::Advice::SetReadMostly, managed_dev).unwrap();
    devmm::advise(&buffer, devmm::Advice::SetPreferredLocation, Device::CPU).unwrap();
    devmm::advise(&buffer, devmm::Advice::SetAccessedBy, second).unwrap();
    if let Some(fake) = u.fake() {
        assert_eq!(range_attribute(fake, p, &buffer, READ_MOSTLY, 1), [1]);
        assert_eq!(range_attribute(fake, p, &buffer, PREFERRED, 1), [-1]);
        assert_eq!(range_attribute(fake, p, &buffer, ACCESSED_BY, 2), [1, -2]);
    }
    devmm::advise(&buffer, devmm::Advice::UnsetReadMostly, managed_dev).unwrap();
    devmm::advise(&buffer, devmm::Advice::UnsetPreferredLocation, Device::CPU).unwrap();
    devmm::advise(&buffer, devmm::Advice::UnsetAccessedBy, second).unwrap();
    if let Some(fake) = u.fake() {
        assert_eq!(range_attribute(fake, p, &buffer, READ_MOSTLY, 1), [0]);
        assert_eq!(range_attribute(fake, p, &buffer, PREFERRED, 1), [-2]);
        assert_eq!(range_attribute(fake, p, &buffer, ACCESSED_BY, 2), [-2, -2]);
    }

    // A target the memory's runtime does not serve.
    let wrong = Device::new(p.host, 0);
    let err = devmm::prefetch(&buffer, wrong, None).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    assert!(err.to_string().contains(&wrong.to_string()), "{err}");
    // A device that does not exist: the driver's invalid-device error.
    let absent = p.dev(7);
    let err = devmm::advise(&buffer, devmm::Advice::SetPreferredLocation, absent).unwrap_err();
    let text = err.to_string();
    assert!(text.contains(&p.call("MemAdvise")), "{text}");
    assert!(
        text.contains(&format!("{}ErrorInvalidDevice", p.prefix)),
        "{text}"
    );
    buffer.free(&s).unwrap();

    // Device memory is not managed: refused before any driver call, naming
    // the resource and what to use.
    let dev = p.dev(0);
    let device_memory = DeviceBuffer::new(
        256,
        rt.default_resource(dev).unwrap(),
        &rt.default_stream(dev).unwrap(),
    )
    .unwrap();
    if let Some(fake) = u.fake() {
        fake.clear_calls();
    }
    let err = devmm::prefetch(&device_memory, dev, None).unwrap_err();
    assert!(matches!(err, Error::Refused { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains(p.device_mr), "{text}");
    assert!(text.contains(p.managed_mr), "{text}");
    let err = devmm::advise(&device_memory, devmm::Advice::SetReadMostly, dev).unwrap_err();
    assert!(
        err.to_string().starts_with("advising needs managed memory"),
        "{err}"
    );
    if let Some(fake) = u.fake() {
        assert!(log_of(fake, &p.call("MemPrefetchAsync")).is_empty());
        assert!(log_of(fake, &p.call("MemAdvise")).is_empty());
    }
    device_memory
        .free(&rt.default_stream(dev).unwrap())
        .unwrap();
    u.assert_no_leaks();
}

/// A `PrefetchAdaptor` prefetches each allocation of its managed upstream
/// to the upstream's device on the allocation's stream; an upstream of
/// device memory is refused when the adaptor is made.
fn prefetch_adaptor_prefetches_each_allocation(p: &'static Platform) {
    let u = Under::new(p);
    let rt = &u.rt;
    let managed_dev = Device::new(p.managed, u.second().index());
    let managed = (p.managed_resource)(u.fake_path(), managed_dev).unwrap();
    let adaptor: Arc<dyn MemoryResource> = Arc::new(devmm::PrefetchAdaptor::new(managed).unwrap());
    let s = rt.create_stream(u.second()).unwrap();
    if let Some(fake) = u.fake() {
        fake.clear_calls();
    }
    let buffer = DeviceBuffer::new(4096, Arc::clone(&adaptor), &s).unwrap();
    let empty = DeviceBuffer::new(0, adaptor, &s).unwrap();
    if let Some(fake) = u.fake() {
        let calls = log_of(fake, &p.call("MemPrefetchAsync"));
        assert_eq!(
            calls.len(),
            1,
            "one prefetch, none for zero bytes: {calls:?}"
        );
        assert_eq!(field(&calls[0], "count"), "4096");
        assert_eq!(field(&calls[0], "device"), "1");
        assert_eq!(field(&calls[0], "stream"), hex(s.handle()));
        assert_eq!(range_attribute(fake, p, &buffer, 4, 1), [1]);
    }
    buffer.free(&s).unwrap();
    empty.free(&s).unwrap();

    let device_memory = rt.default_resource(p.dev(0)).unwrap();
    let err = devmm::PrefetchAdaptor::new(device_memory).unwrap_err();
    assert!(matches!(err, Error::Refused { .. }), "{err:?}");
    assert!(err.to_string().contains(p.device_mr), "{err}");
    u.assert_no_leaks();
}

fn missing_library_is_runtime_unavailable(p: &'static Platform) {
    let err = (p.load)(Some(Path::new("/nonexistent/libdriver.so"))).unwrap_err();
    match &err {
        Error::RuntimeUnavailable { name, reason } => {
            assert_eq!(name, p.runtime);
            assert!(
                reason.starts_with("cannot load /nonexistent/libdriver.so: "),
                "{reason}"
            );
        }
        other => panic!("expected runtime unavailable, got {other:?}"),
    }
}

/// fork() after the runtime started (issue 29, defect 4): the runtime
/// belongs to the process that started it, so in a forked child devmm
/// refuses every GPU call before it reaches the driver, with an error that
/// says so and names the `spawn` start method; memory the child inherited
/// is left to the parent (dropping it calls nothing); CPU memory works;
/// and the parent goes on as before. On hardware this is the check that
/// the child never touches the parent's GPU state (the fake also counts
/// the calls).
fn a_child_forked_after_the_runtime_started_is_refused(p: &'static Platform) {
    let u = Under::new(p);
    let rt = &u.rt;
    let dev = p.dev(0);
    let mr = rt.default_resource(dev).unwrap();
    let stream = rt.default_stream(dev).unwrap();
    let inherited = DeviceBuffer::new(4096, Arc::clone(&mr), &stream).unwrap();
    let data: Vec<u8> = (0..=255).cycle().take(4096).collect();
    // SAFETY: `inherited` is a live 4096-byte buffer of `dev`.
    unsafe { rt.copy_host_to_device(inherited.ptr(), &data, &stream) }.unwrap();
    let pool = (p.own_pool)(u.fake_path(), dev, PoolOptions::default()).unwrap();
    if let Some(fake) = u.fake() {
        fake.clear_calls();
    }
    let child = in_forked_child(|| {
        // A pool of its own is the parent's too: its figures, trim and
        // marks are refused, and dropping it destroys nothing.
        let refused = [
            MemoryResource::pool_statistics(&*pool).unwrap().map(drop),
            pool.reset_high_water(),
        ];
        for err in refused.into_iter().map(Result::unwrap_err) {
            assert!(matches!(err, Error::ForkedAfterStart { .. }), "{err:?}");
        }
        // SAFETY: the child's copy of `pool` is dropped only here, and the
        // child `_exit`s right after.
        drop(unsafe { std::ptr::read(&pool) });
        let err = mr.allocate(64, &stream).unwrap_err();
        let Error::ForkedAfterStart {
            ref runtime,
            device,
            ..
        } = err
        else {
            panic!("expected the fork error, got {err:?}");
        };
        assert_eq!((runtime.as_str(), device), (p.runtime, dev));
        let text = err.to_string();
        assert!(text.contains("fork"), "{text}");
        assert!(text.contains("`spawn` start method"), "{text}");
        for refused in [
            rt.memory_info(dev).map(drop),
            rt.create_stream(dev).map(drop),
            stream.synchronize(),
        ] {
            let err = refused.unwrap_err();
            assert!(matches!(err, Error::ForkedAfterStart { .. }), "{err:?}");
        }
        // Inherited memory is the parent's: dropping it frees nothing.
        // SAFETY: the child's copy of `inherited` is dropped only here: the
        // closure borrows it, and the child `_exit`s right after.
        drop(unsafe { std::ptr::read(&inherited) });
        let cpu = MallocMemoryResource::new();
        let ptr = cpu.allocate(64, &Stream::cpu()).unwrap();
        // SAFETY: allocated just above, freed once.
        unsafe { cpu.deallocate(ptr, 64, &Stream::cpu()) }.unwrap();
        if let Some(fake) = u.fake() {
            assert_eq!(
                fake.call_log(),
                Vec::<String>::new(),
                "the child called the driver"
            );
        }
    });
    assert_eq!(child, Ok(()), "the forked child");
    if let Some(fake) = u.fake() {
        assert!(fake.call_log().is_empty(), "{:?}", fake.call_log());
    }
    let mut back = vec![0u8; 4096];
    // SAFETY: `inherited` is still live in this process.
    unsafe { rt.copy_device_to_host(&mut back, inherited.ptr(), &stream) }.unwrap();
    assert_eq!(back, data, "the parent's memory is intact");
    drop(inherited);
    drop(pool);
    let ptr = mr.allocate(64, &stream).unwrap();
    // SAFETY: allocated just above, freed once.
    unsafe { mr.deallocate(ptr, 64, &stream) }.unwrap();
    stream.synchronize().unwrap();
    // A runtime first opened in the child (another library started the
    // driver in the parent) finds a driver that cannot be initialised there,
    // and says how to start such a process, not to update the driver.
    if let Some(path) = u.fake_path() {
        let child = in_forked_child(|| {
            let Err(err) = (p.load)(Some(path)) else {
                panic!("a runtime opened in a forked child");
            };
            let text = err.to_string();
            assert!(text.contains("could not be initialised"), "{text}");
            assert!(text.contains("`spawn` start method"), "{text}");
            assert!(!text.contains("update the GPU driver"), "{text}");
        });
        assert_eq!(child, Ok(()), "the forked child");
    }
    u.assert_no_leaks();
}

/// A driver's out-of-memory (the fake's memory limit) reaches a
/// `FailureCallbackAdaptor`, whose callback frees a held buffer and
/// synchronizes so the retry fits; the hooks see only the failure nothing
/// recovered, with the driver's figures.
fn a_driver_out_of_memory_is_recovered_by_a_failure_callback(p: &'static Platform) {
    let u = Under::new(p);
    let Some(fake) = u.fake() else {
        return skipped_on_hardware("needs the fake's memory limit");
    };
    let dev = u.second();
    assert_eq!(fake.set_memory_limit(1, 1 << 20), 0);
    let device_mr = u.rt.default_resource(dev).unwrap();
    let stream = u.rt.default_stream(dev).unwrap();
    let held = Arc::new(std::sync::Mutex::new(Some(
        devmm::DeviceBuffer::new(1 << 19, Arc::clone(&device_mr), &stream).unwrap(),
    )));
    let calls = Arc::new(std::sync::Mutex::new(Vec::new()));
    let recovering: Arc<dyn MemoryResource> = Arc::new(devmm::FailureCallbackAdaptor::new(
        Arc::clone(&device_mr),
        {
            let (held, calls, stream) = (Arc::clone(&held), Arc::clone(&calls), stream.clone());
            move |nbytes, attempt, error: &Error| {
                calls
                    .lock()
                    .unwrap()
                    .push((nbytes, attempt, error.out_of_memory_figures()));
                let freed = held.lock().unwrap().take().is_some();
                // The free is stream-ordered: done once the stream is.
                stream.synchronize().map_err(devmm::CallbackError::new)?;
                Ok(freed)
            }
        },
    ));
    let me = std::thread::current().id();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let hook = devmm::on_out_of_memory({
        let seen = Arc::clone(&seen);
        move |err| {
            if std::thread::current().id() == me {
                seen.lock().unwrap().push(err.out_of_memory_figures());
            }
            Ok(())
        }
    });
    let big = devmm::DeviceBuffer::new(3 << 18, Arc::clone(&recovering), &stream).unwrap();
    {
        let calls = calls.lock().unwrap();
        let [(nbytes, 1, Some(figures))] = calls.as_slice() else {
            panic!("expected one call with the driver's figures, got {calls:?}");
        };
        assert_eq!(
            (*nbytes, figures.device, figures.nbytes),
            (3 << 18, dev, 3 << 18)
        );
        assert_eq!((figures.pool, figures.largest_fit), (None, None));
    }
    assert!(
        seen.lock().unwrap().is_empty(),
        "a recovered failure runs no hook"
    );
    let err = devmm::DeviceBuffer::new(1 << 19, recovering, &stream).unwrap_err();
    assert!(
        matches!(err, Error::OutOfMemory { device, nbytes, .. } if device == dev && nbytes == 1 << 19),
        "{err:?}"
    );
    let seen = seen.lock().unwrap();
    let [Some(figures)] = seen.as_slice() else {
        panic!("expected the hooks to see the failure once, got {seen:?}");
    };
    assert!(
        figures.chain.starts_with("FailureCallbackAdaptor -> "),
        "{}",
        figures.chain
    );
    hook.remove();
    drop(big);
}

const MIB: usize = 1 << 20;

/// Issue 30's check, run on hardware by the smoke: three 64 MiB blocks from
/// a pool of its own, the middle one freed: 128 MiB used, at least 192 MiB
/// still reserved (the default release threshold keeps it); trimming hands
/// the unused memory back, and the high-water marks reset to the figures.
fn own_pool_figures_after_freeing_the_middle_of_three_blocks(p: &'static Platform) {
    let u = Under::new(p);
    let dev = p.dev(0);
    let mr = (p.own_pool)(u.fake_path(), dev, PoolOptions::default()).unwrap();
    assert!(mr.stream_ordered());
    assert_eq!(
        format!("{mr:?}"),
        format!("{}(device={dev}, alignment=256)", p.pool_mr)
    );
    let stream = u.rt.create_stream(dev).unwrap();
    let size = 64 * MIB;
    let blocks: Vec<_> = (0..3)
        .map(|_| mr.allocate(size, &stream).unwrap())
        .collect();
    // SAFETY: allocated above with this size, freed once.
    unsafe { mr.deallocate(blocks[1], size, &stream) }.unwrap();
    stream.synchronize().unwrap();
    let figures = mr.figures();
    assert_eq!(figures.used_bytes, 128 << 20, "{figures:?}");
    assert!(figures.reserved_bytes >= 192 << 20, "{figures:?}");
    assert_eq!(figures.used_high_bytes, 192 << 20, "{figures:?}");
    assert!(
        figures.reserved_high_bytes >= figures.reserved_bytes,
        "{figures:?}"
    );
    assert_eq!(
        figures.fragmentation_bytes(),
        figures.reserved_bytes - (128 << 20)
    );
    assert_eq!(
        mr.pool_statistics().unwrap().unwrap(),
        figures,
        "the trait's answer"
    );
    // Reset with blocks live, the marks are the current figures (HIP
    // writes 0 to them, which devmm never reports below the figures).
    mr.reset_high_water().unwrap();
    let reset = mr.figures();
    assert_eq!(reset.used_high_bytes, reset.used_bytes, "{reset:?}");
    assert_eq!(reset.reserved_high_bytes, reset.reserved_bytes, "{reset:?}");
    for &ptr in [blocks[0], blocks[2]].iter() {
        // SAFETY: as above.
        unsafe { mr.deallocate(ptr, size, &stream) }.unwrap();
    }
    stream.synchronize().unwrap();
    let freed = mr.figures();
    assert_eq!(freed.used_bytes, 0, "{freed:?}");
    assert_eq!(
        freed.used_high_bytes, reset.used_bytes,
        "the mark keeps the figure it was reset to: {freed:?}"
    );
    assert!(
        freed.reserved_bytes >= 192 << 20,
        "kept for reuse: {freed:?}"
    );
    mr.trim_to(0);
    let trimmed = mr.figures();
    assert!(trimmed.reserved_bytes < 192 << 20, "{trimmed:?}");
    if u.fake().is_some() {
        assert_eq!(trimmed.reserved_bytes, 0, "{trimmed:?}");
    }
    mr.reset_high_water().unwrap();
    let reset = mr.figures();
    assert_eq!(reset.used_high_bytes, 0, "{reset:?}");
    assert_eq!(reset.reserved_high_bytes, reset.reserved_bytes, "{reset:?}");
    drop(mr);
    if let Some(fake) = u.fake() {
        assert_eq!(
            fake.live_pools(),
            0,
            "the pool is destroyed with its resource"
        );
        let free = u.rt.memory_info(dev).unwrap();
        assert_eq!(free.free, free.total, "its memory went back to the device");
    }
    u.assert_no_leaks();
}

/// The statistics profiler's report shows the pool below the profiled
/// resource: its figures when the run ended (issue 30's three 64 MiB
/// blocks, the middle one freed: 128 MiB used, at least 192 MiB reserved)
/// and the fragmentation, reserved minus used. Run by the smoke on
/// hardware with the other own-pool checks.
fn own_pool_figures_in_the_profilers_report(p: &'static Platform) {
    let u = Under::new(p);
    let dev = p.dev(0);
    let mr = (p.own_pool)(u.fake_path(), dev, PoolOptions::default()).unwrap();
    let current: Arc<dyn MemoryResource> = mr.clone();
    let guard = devmm::using_memory_resource(current);
    let stream = u.rt.default_stream(dev).unwrap();
    let records = ProfilerRecords::new();
    let kept = profile("three blocks", &records, dev, || {
        // The profiler's scope, over the pool (the test's runtime is not
        // the process's, so the buffers name their stream).
        let scope = devmm::get_current_memory_resource(dev).unwrap();
        let mut blocks: Vec<_> = (0..3)
            .map(|_| DeviceBuffer::new(64 * MIB, Arc::clone(&scope), &stream).unwrap())
            .collect();
        blocks.remove(1).free(&stream).unwrap();
        stream.synchronize().unwrap();
        blocks
    })
    .unwrap();
    // A run over memory without a pool adds no pool.
    profile("host", &records, Device::CPU, || {
        DeviceBuffer::on_device(64, Device::CPU).unwrap()
    })
    .unwrap();
    let pools = records.pools();
    let name = format!("{mr:?}");
    assert_eq!(pools.keys().collect::<Vec<_>>(), [&name]);
    let figures = pools[&name];
    assert_eq!(figures.used_bytes, 128 << 20, "{figures:?}");
    assert_eq!(figures.used_high_bytes, 192 << 20, "{figures:?}");
    assert!(figures.reserved_bytes >= 192 << 20, "{figures:?}");
    let fragmentation = figures.reserved_bytes - figures.used_bytes;
    let report = records.report(OrderBy::MemoryPeak);
    let table = report
        .split_once("\nMemory Pools\n============\n\n")
        .unwrap_or_else(|| panic!("no pool table in:\n{report}"))
        .1;
    let mut lines = table.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap()
        .split("  ")
        .filter(|t| !t.is_empty())
        .map(str::trim)
        .collect();
    assert_eq!(
        header,
        [
            "Pool",
            "reserved bytes",
            "reserved high",
            "used bytes",
            "used high",
            "fragmentation"
        ],
        "{report}"
    );
    let row = lines.next().unwrap();
    assert!(row.starts_with(&format!("{name}  ")), "{report}");
    let numbers: Vec<u64> = row[name.len()..]
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    assert_eq!(
        numbers,
        [
            figures.reserved_bytes,
            figures.reserved_high_bytes,
            128 << 20,
            192 << 20,
            fragmentation
        ],
        "{report}"
    );
    assert_eq!(lines.next(), None, "one pool: {report}");
    for block in &kept {
        block.free(&stream).unwrap();
    }
    drop((kept, guard));
    stream.synchronize().unwrap();
    drop(mr);
    u.assert_no_leaks();
}

/// A pool's own settings: the initial size is reserved at once, a release
/// threshold of 0 hands freed memory back at synchronization, the maximum
/// size refuses with an out-of-memory error that shows the pool's figures,
/// and contradictory settings are refused before anything is made.
fn own_pool_settings_and_refusals(p: &'static Platform) {
    let u = Under::new(p);
    let dev = p.dev(0);
    let make = |options| (p.own_pool)(u.fake_path(), dev, options);
    let primed = make(PoolOptions {
        initial_pool_size: Some(8 * MIB),
        ..PoolOptions::default()
    })
    .unwrap();
    assert!(
        primed.figures().reserved_bytes >= 8 << 20,
        "{:?}",
        primed.figures()
    );
    // The priming block's free is ordered on the device's default stream.
    u.rt.default_stream(dev).unwrap().synchronize().unwrap();
    assert_eq!(primed.figures().used_bytes, 0);
    assert!(
        primed.figures().reserved_bytes >= 8 << 20,
        "kept: {:?}",
        primed.figures()
    );
    drop(primed);

    let stream = u.rt.create_stream(dev).unwrap();
    let returning = make(PoolOptions {
        release_threshold: Some(0),
        ..PoolOptions::default()
    })
    .unwrap();
    let ptr = returning.allocate(4 * MIB, &stream).unwrap();
    // SAFETY: allocated above with this size, freed once.
    unsafe { returning.deallocate(ptr, 4 * MIB, &stream) }.unwrap();
    stream.synchronize().unwrap();
    assert_eq!(returning.figures().used_bytes, 0);
    if u.fake().is_some() {
        assert_eq!(
            returning.figures().reserved_bytes,
            0,
            "released at synchronization"
        );
    }
    drop(returning);

    let bounded = make(PoolOptions {
        max_pool_size: Some(4 * MIB),
        ..PoolOptions::default()
    })
    .unwrap();
    assert!(
        format!("{bounded:?}").contains("max_pool_size=4194304"),
        "{bounded:?}"
    );
    let kept = bounded.allocate(3 * MIB, &stream).unwrap();
    let err = bounded.allocate(2 * MIB, &stream).unwrap_err();
    assert!(err.is_out_of_memory(), "{err}");
    let text = err.to_string();
    assert!(
        text.contains(p.pool_mr) && text.contains(&dev.to_string()),
        "{text}"
    );
    assert!(
        text.contains("bytes reserved") && text.contains("max_pool_size 4194304"),
        "{text}"
    );
    // The pool's figures travel with the error, not only in its text.
    let pool = err.out_of_memory_figures().and_then(|f| f.pool);
    assert_eq!(pool, Some(bounded.figures()), "{err:?}");
    assert_eq!(pool.map(|s| s.used_bytes), Some(3 << 20), "{err:?}");
    // HIP checks a pool's limit against its reserved high-water mark,
    // which a reset makes 0: a bounded pool's marks are not reset there.
    let reset = bounded.reset_high_water();
    if p.runtime == "rocm" {
        let err = reset.unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
        let text = err.to_string();
        assert!(
            text.contains(p.pool_mr) && text.contains("max_pool_size"),
            "{text}"
        );
    } else {
        reset.unwrap();
    }
    let err = bounded.allocate(2 * MIB, &stream).unwrap_err();
    assert!(
        err.is_out_of_memory(),
        "the limit holds after a reset: {err}"
    );
    // SAFETY: allocated above with this size, freed once.
    unsafe { bounded.deallocate(kept, 3 * MIB, &stream) }.unwrap();
    stream.synchronize().unwrap();
    drop(bounded);

    let refused = |options: PoolOptions, says: &str| {
        let err = make(options).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
        assert!(err.to_string().contains(says), "{err}");
    };
    let too_big = PoolOptions {
        initial_pool_size: Some(8 * MIB),
        max_pool_size: Some(4 * MIB),
        ..PoolOptions::default()
    };
    refused(
        too_big,
        "initial_pool_size=8388608 is above max_pool_size=4194304",
    );
    let empty = PoolOptions {
        max_pool_size: Some(0),
        ..PoolOptions::default()
    };
    refused(empty, "max_pool_size=0");
    let itself = PoolOptions {
        peer_access: vec![dev],
        ..PoolOptions::default()
    };
    refused(itself, "peer_access names");
    let err = (p.own_pool)(u.fake_path(), Device::CPU, PoolOptions::default()).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
    assert!(err.to_string().contains(p.pool_mr), "{err}");
    // A misuse names the resource it was made on.
    let mr = make(PoolOptions::default()).unwrap();
    // SAFETY: a null pointer with a size is refused before the driver sees it.
    let err = unsafe { mr.deallocate(devmm::DevicePtr::NULL, 64, &stream) }.unwrap_err();
    assert!(matches!(err, Error::Misuse { .. }), "{err}");
    assert!(err.to_string().contains(p.pool_mr), "{err}");
    drop(mr);
    if let Some(fake) = u.fake() {
        assert_eq!(fake.live_pools(), 0, "every pool made here was destroyed");
        // HIP's pools ignore `maxSize` before 6.2 (the bytes are reserved
        // there): a limit the pool would grow past is refused.
        fake.set_version(60_100_000, 60_100_000);
        let limited = PoolOptions {
            max_pool_size: Some(4 * MIB),
            ..PoolOptions::default()
        };
        match make(limited) {
            Ok(mr) => {
                assert_eq!(p.runtime, "cuda", "HIP 6.1 took a limit it ignores");
                let kept = mr.allocate(3 * MIB, &stream).unwrap();
                assert!(
                    mr.allocate(2 * MIB, &stream)
                        .unwrap_err()
                        .is_out_of_memory()
                );
                // SAFETY: allocated above with this size, freed once.
                unsafe { mr.deallocate(kept, 3 * MIB, &stream) }.unwrap();
                stream.synchronize().unwrap();
            }
            Err(err) => {
                assert_eq!(p.runtime, "rocm", "{err}");
                assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
                assert!(err.to_string().contains("6.2.0 or later"), "{err}");
            }
        }
        assert_eq!(fake.live_pools(), 0);
    }
    u.assert_no_leaks();
}

/// What the driver is asked (fakes only): peer access for the devices
/// named, an IPC-capable pool, a device or library without pools refused
/// with the resource to use instead, and a pool destroyed after its blocks.
fn own_pool_driver_calls(p: &'static Platform) {
    let u = Under::new(p);
    let Some(fake) = u.fake() else {
        return skipped_on_hardware("checks the fake's call log");
    };
    let dev = p.dev(0);
    let options = PoolOptions {
        enable_ipc: true,
        peer_access: vec![p.dev(1)],
        ..PoolOptions::default()
    };
    let mr = (p.own_pool)(u.fake_path(), dev, options).unwrap();
    let created = log_of(fake, &p.call("MemPoolCreate"));
    assert_eq!(field(&created[0], "handle_types"), "1", "{created:?}");
    assert_eq!(field(&created[0], "device"), "0");
    let access = log_of(fake, &p.call("MemPoolSetAccess"));
    assert_eq!(access.len(), 1, "{access:?}");
    assert_eq!(
        (field(&access[0], "device"), field(&access[0], "flags")),
        ("1", "3")
    );
    assert!(access[0].ends_with("-> 0"), "{access:?}");
    let stream = u.rt.create_stream(dev).unwrap();
    let buffer = devmm::DeviceBuffer::new(1000, mr, &stream).unwrap();
    let from_pool = log_of(fake, &p.call("MallocFromPoolAsync"));
    assert_eq!(field(&from_pool[0], "pool"), field(&created[0], "pool"));
    assert_eq!(fake.call_count(&p.call("MallocAsync")), 0);
    assert_eq!(
        fake.live_pools(),
        1,
        "the buffer keeps its resource and pool"
    );
    drop(buffer);
    stream.synchronize().unwrap();
    assert_eq!(fake.live_pools(), 0);
    let log = fake.call_log();
    let position = |call: String| log.iter().position(|l| l.starts_with(&call)).unwrap();
    assert!(
        position(p.call("FreeAsync")) < position(p.call("MemPoolDestroy")),
        "{log:?}"
    );

    assert_eq!(fake.set_pools(1, false), 0);
    let err = (p.own_pool)(u.fake_path(), p.dev(1), PoolOptions::default()).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
    assert!(
        err.to_string()
            .contains(&format!("use {} instead", p.device_mr)),
        "{err}"
    );
    let sync = (p.fake_sync)(fake_libraries());
    let err = (p.own_pool)(Some(sync), dev, PoolOptions::default()).unwrap_err();
    assert!(err.to_string().contains("needs memory pools"), "{err}");
    u.assert_no_leaks();
}

macro_rules! platform_tests {
    ($module:ident, $platform:ident: $($test:ident),* $(,)?) => {
        mod $module {
            $(
                #[test]
                fn $test() {
                    super::$test(&super::$platform)
                }
            )*
        }
    };
}

fn ipc_descriptor_of_an_ipc_pool_and_refusals(p: &'static Platform) {
    let u = Under::new(p);
    let dev = p.dev(0);
    let stream = u.rt.create_stream(dev).unwrap();
    let plain: Arc<dyn MemoryResource> =
        (p.own_pool)(u.fake_path(), dev, PoolOptions::default()).unwrap();
    let buf = DeviceBuffer::new(256, plain, &stream).unwrap();
    let err = buf.ipc_descriptor().unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains(&format!("{}(enable_ipc=True)", p.pool_mr)),
        "{text}"
    );
    assert!(text.contains("enable_ipc: true"), "{text}");
    buf.free(&stream).unwrap();

    let shared = ipc_pool(&u, dev);
    let buf = DeviceBuffer::new(300, shared, &stream).unwrap();
    let mut descriptor = buf.ipc_descriptor().unwrap();
    assert_eq!(
        (
            descriptor.device(),
            descriptor.nbytes(),
            descriptor.exporter_pid()
        ),
        (dev, 300, std::process::id())
    );
    assert!(descriptor.handle().is_some());
    assert_ne!(descriptor.export_data(), &[0u8; 64]);
    // Its own process uses the buffer, not the descriptor.
    let err = DeviceBuffer::from_ipc_descriptor(&descriptor, &stream).unwrap_err();
    assert!(
        err.to_string().contains("exported by this process"),
        "{err}"
    );
    descriptor.close();
    let err = DeviceBuffer::from_ipc_descriptor(&descriptor, &stream).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    assert!(err.to_string().contains("is closed"), "{err}");
    // Closing or dropping a descriptor leaves the pool able to export
    // again: HIP hands every export the pool's own file descriptor, which
    // no descriptor may close.
    for _ in 0..2 {
        let again = buf.ipc_descriptor().unwrap();
        let fd = again.handle().unwrap().try_clone_to_owned();
        assert!(fd.is_ok(), "the export's descriptor is open: {fd:?}");
    }
    // No other process imported it: the exporter frees as usual.
    buf.free(&stream).unwrap();
    if let Some(fake) = u.fake() {
        let prefix = p.prefix;
        assert_eq!(fake.call_count(&format!("{prefix}MemPoolExportPointer")), 3);
        assert_eq!(
            fake.call_count(&format!("{prefix}MemPoolExportToShareableHandle")),
            3
        );
    }
}

/// Set in the child `ipc_round_trip_with_another_process` starts: the
/// descriptor's parts (`nbytes,pid,export data in hex`); its file
/// descriptor is the child's fd [`IPC_CHILD_FD`].
const IPC_CHILD: &str = "DEVMM_TEST_IPC_CHILD";
const IPC_CHILD_FD: i32 = 3;

/// A new pool of `dev` whose memory other processes can map.
fn ipc_pool(u: &Under, dev: Device) -> Arc<dyn MemoryResource> {
    let options = PoolOptions {
        enable_ipc: true,
        ..PoolOptions::default()
    };
    (u.p.own_pool)(u.fake_path(), dev, options).unwrap()
}

/// Runs this binary's `test` (in `p`'s module) in a child process, with
/// `envs`, the fake's library where the parent has one, and the file
/// descriptor `fd` placed at [`IPC_CHILD_FD`]; fails with the child's
/// output unless its one test passed.
fn run_child(u: &Under, test: &str, envs: &[(&str, &str)], fd: std::os::fd::RawFd) {
    use std::os::unix::process::CommandExt;
    let mut child = std::process::Command::new(std::env::current_exe().unwrap());
    child
        .args([
            "--exact",
            &format!("{}::{test}", u.p.runtime),
            "--nocapture",
        ])
        .envs(envs.iter().copied());
    if let Some(path) = u.fake_path() {
        child.env(u.p.path_var, path);
    }
    // SAFETY: between fork and exec, only async-signal-safe calls: the
    // descriptor is placed at the fd the child reads, without close-on-exec.
    unsafe {
        child.pre_exec(move || {
            let placed = if fd == IPC_CHILD_FD {
                libc::fcntl(fd, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, IPC_CHILD_FD)
            };
            if placed < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let output = child.output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "the child process running {test} with {envs:?} failed: {stdout}\n{stderr}"
    );
}

/// The child's side: maps the parent's buffer through the process-wide
/// runtime (the fake named by the path variable, or the real driver),
/// reads it, writes to it, and frees its mapping.
fn ipc_child(p: &'static Platform, parts: &str) {
    use std::os::fd::FromRawFd;
    let mut parts = parts.split(',');
    let mut next = || parts.next().expect("three parts");
    let nbytes: usize = next().parse().unwrap();
    let pid: u32 = next().parse().unwrap();
    let hex = next();
    let mut data = [0u8; 64];
    for (i, byte) in data.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
    }
    // SAFETY: the parent passed this descriptor to the child, which owns it.
    let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(IPC_CHILD_FD) };
    let dev = p.dev(0);
    let descriptor = devmm::ipc::IpcDescriptor::from_parts(dev, nbytes, fd, data, pid);
    // A stream of its own: the write below is queued on it (with the
    // fake's delay, it lands well after the call returns), and the free
    // right after it must not unmap the memory before it lands.
    let stream = devmm::runtime::runtime_for(dev)
        .and_then(|rt| rt.create_stream(dev))
        .unwrap();
    let mapped = DeviceBuffer::from_ipc_descriptor(&descriptor, &stream).unwrap();
    assert!(mapped.is_foreign());
    let mut seen = vec![0u8; nbytes];
    // SAFETY: `seen` holds the buffer's bytes; device memory is copied.
    unsafe { mapped.copy_to_host(&mut seen) }.unwrap();
    assert_eq!(seen, b"parent bytes");
    // A device-to-device copy is queued, not waited for (a copy from the
    // host is: it borrows its source).
    let local = devmm::runtime::runtime_for(dev)
        .and_then(|rt| rt.default_resource(dev))
        .and_then(|mr| DeviceBuffer::new(5, mr, &stream))
        .unwrap();
    // SAFETY: a 5-byte device buffer, copied from the host (waited for).
    unsafe { local.copy_from_host(b"CHILD") }.unwrap();
    // SAFETY: both are live device buffers of at least 5 bytes.
    unsafe { devmm::copy_device_to_ptr(local.ptr(), mapped.ptr(), 5, &stream) }.unwrap();
    mapped.free(&stream).unwrap();
    local.free(&stream).unwrap();
}

fn ipc_round_trip_with_another_process(p: &'static Platform) {
    if let Ok(parts) = std::env::var(IPC_CHILD) {
        return ipc_child(p, &parts);
    }
    use std::os::fd::AsRawFd;
    let u = Under::new(p);
    let dev = p.dev(0);
    let stream = u.rt.create_stream(dev).unwrap();
    let shared = ipc_pool(&u, dev);
    let buf = DeviceBuffer::new(12, shared, &stream).unwrap();
    // Queued work lands late under the fake, so a descriptor made, or a
    // mapping freed, before the work on its stream is done shows here: the
    // parent's write lands a second after it is queued, well after the
    // child has started and read (its own work waits 50 ms).
    const PARENT_DELAY_US: u64 = 1_000_000;
    const CHILD_DELAY_US: u64 = 50_000;
    if let Some(fake) = u.fake() {
        fake.set_stream_delay(PARENT_DELAY_US);
    }
    // Queued on the buffer's stream and not waited for: the export waits
    // for it.
    let staged = DeviceBuffer::new(12, u.rt.default_resource(dev).unwrap(), &stream).unwrap();
    // SAFETY: a 12-byte device buffer, copied from the host (waited for).
    unsafe { staged.copy_from_host(b"parent bytes") }.unwrap();
    // SAFETY: both are live device buffers of 12 bytes.
    unsafe { devmm::copy_device_to_ptr(staged.ptr(), buf.ptr(), 12, &stream) }.unwrap();
    let descriptor = buf.ipc_descriptor().unwrap();
    let hex: String = descriptor
        .export_data()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let fd = descriptor.handle().unwrap().as_raw_fd();
    let parts = format!(
        "{},{},{hex}",
        descriptor.nbytes(),
        descriptor.exporter_pid()
    );
    let delay = CHILD_DELAY_US.to_string();
    let mut envs = vec![(IPC_CHILD, parts.as_str())];
    if u.fake().is_some() {
        envs.push(("FAKE_DRIVER_STREAM_DELAY_US", &delay));
    }
    run_child(&u, "ipc_round_trip_with_another_process", &envs, fd);
    if let Some(fake) = u.fake() {
        fake.set_stream_delay(0);
    }
    // The child's write is here, and its free left the memory alone.
    let mut back = [0u8; 12];
    // SAFETY: `back` holds the buffer's 12 bytes.
    unsafe { buf.copy_to_host(&mut back) }.unwrap();
    assert_eq!(&back, b"CHILDt bytes");
    buf.free(&stream).unwrap();
    staged.free(&stream).unwrap();
}

/// What the parent of `ipc_in_a_process_that_numbers_the_gpus_another_way`
/// passes its child: the descriptor's and the legacy handle's parts.
const IPC_VISIBLE_CHILD: &str = "DEVMM_TEST_IPC_VISIBLE_CHILD";
/// `"refused"`, or the device the child must map the memory on.
const IPC_VISIBLE_EXPECT: &str = "DEVMM_TEST_IPC_VISIBLE_EXPECT";

fn ipc_visible_child(p: &'static Platform, parts: &str) {
    use std::os::fd::FromRawFd;
    let parts: Vec<&str> = parts.split(',').collect();
    let [nbytes, pid, bus, data_hex, handle_hex] = parts[..] else {
        panic!("five parts: {parts:?}");
    };
    let (nbytes, pid): (usize, u32) = (nbytes.parse().unwrap(), pid.parse().unwrap());
    let bytes = |hex: &str| -> [u8; 64] {
        std::array::from_fn(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
    };
    let bus = devmm::ipc::PciBusId::new(bus).unwrap();
    // SAFETY: the parent passed this descriptor to the child, which owns it.
    let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(IPC_CHILD_FD) };
    // The exporter's device 1, as the exporter numbers it.
    let descriptor =
        devmm::ipc::IpcDescriptor::from_parts(p.dev(1), nbytes, fd, bytes(data_hex), pid)
            .with_pci_bus_id(bus);
    let handle = devmm::ipc::IpcMemHandle::from_parts(p.dev(1), nbytes, bytes(handle_hex), pid)
        .with_pci_bus_id(bus);
    let stream = devmm::runtime::stream_for(p.dev(0), None).unwrap();
    if std::env::var(IPC_VISIBLE_EXPECT).unwrap() == "refused" {
        let refusals = [
            descriptor.device_here().unwrap_err(),
            handle.device_here().unwrap_err(),
            DeviceBuffer::from_ipc_descriptor(&descriptor, &stream).unwrap_err(),
            DeviceBuffer::from_ipc_handle(&handle, &stream).unwrap_err(),
        ];
        for err in refusals {
            assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
            let text = err.to_string();
            assert!(
                text.contains(&format!(
                    "the GPU at PCI bus {bus}, which this process does not see"
                )),
                "{text}"
            );
        }
        return;
    }
    let here = p.dev(0);
    assert_eq!(descriptor.device_here().unwrap(), here);
    assert_eq!(handle.device_here().unwrap(), here);
    // A process forked from this one, whose runtime has started, is
    // refused before finding the GPU asks the driver anything.
    let forked = in_forked_child(|| {
        for err in [descriptor.device_here(), handle.device_here()] {
            let err = err.unwrap_err();
            assert!(matches!(err, Error::ForkedAfterStart { .. }), "{err:?}");
        }
    });
    assert_eq!(forked, Ok(()), "the forked child");
    // The stream must be one of that device.
    let elsewhere = devmm::runtime::stream_for(p.dev(1), None).unwrap();
    for err in [
        DeviceBuffer::from_ipc_descriptor(&descriptor, &elsewhere).unwrap_err(),
        DeviceBuffer::from_ipc_handle(&handle, &elsewhere).unwrap_err(),
    ] {
        assert!(matches!(err, Error::Refused { .. }), "{err:?}");
        assert!(
            err.to_string()
                .contains(&format!("pass a stream of {here}")),
            "{err}"
        );
    }
    let mapped = DeviceBuffer::from_ipc_descriptor(&descriptor, &stream).unwrap();
    let opened = DeviceBuffer::from_ipc_handle(&handle, &stream).unwrap();
    for buffer in [&mapped, &opened] {
        assert_eq!(buffer.device(), here);
        let mut seen = vec![0u8; nbytes];
        // SAFETY: `seen` holds the buffer's bytes; device memory is copied.
        unsafe { buffer.copy_to_host(&mut seen) }.unwrap();
        assert_eq!(seen, b"on the GPU 1");
    }
    mapped.free(&stream).unwrap();
    opened.free(&stream).unwrap();
}

/// Ordinals are each process's own (`CUDA_VISIBLE_DEVICES`,
/// `HIP_VISIBLE_DEVICES`): memory exported from the exporter's device 1 is
/// the importer's device 0 when the importer lists that GPU first. An
/// export names its GPU by its PCI bus id, and the importer maps it on the
/// device with that id, or, when it does not see that GPU, refuses with an
/// error that says so (the fake's `FAKE_DRIVER_VISIBLE_DEVICES` numbers
/// the child's GPUs as the variables do).
fn ipc_in_a_process_that_numbers_the_gpus_another_way(p: &'static Platform) {
    if let Ok(parts) = std::env::var(IPC_VISIBLE_CHILD) {
        return ipc_visible_child(p, &parts);
    }
    use std::os::fd::AsRawFd;
    let u = Under::new(p);
    if u.fake().is_none() {
        return skipped_on_hardware("numbers the fake's GPUs per process");
    }
    let dev = p.dev(1);
    let stream = u.rt.create_stream(dev).unwrap();
    let shared = ipc_pool(&u, dev);
    let pooled = DeviceBuffer::new(12, shared, &stream).unwrap();
    let sync = (p.sync_device)(u.fake_path(), dev).unwrap();
    let malloced = DeviceBuffer::new(12, sync, &stream).unwrap();
    for buffer in [&pooled, &malloced] {
        // SAFETY: a 12-byte device buffer, copied from the host (waited for).
        unsafe { buffer.copy_from_host(b"on the GPU 1") }.unwrap();
    }
    let descriptor = pooled.ipc_descriptor().unwrap();
    let handle = malloced.ipc_handle().unwrap();
    let bus = descriptor.pci_bus_id().expect("an export names its GPU");
    assert_eq!(handle.pci_bus_id(), Some(bus));
    let described = u.rt.describe(dev).unwrap().pci_bus_id.unwrap();
    assert_eq!(devmm::ipc::PciBusId::new(&described), Some(bus));
    let hex = |bytes: &[u8; 64]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let parts = format!(
        "{},{},{bus},{},{}",
        descriptor.nbytes(),
        descriptor.exporter_pid(),
        hex(descriptor.export_data()),
        hex(handle.handle_bytes())
    );
    let fd = descriptor.handle().unwrap().as_raw_fd();
    let here = p.dev(0).to_string();
    // (the child's GPUs, as it numbers them; what it must do)
    for (visible, expect) in [("1,0", here.as_str()), ("0", "refused")] {
        let envs = [
            (IPC_VISIBLE_CHILD, parts.as_str()),
            (IPC_VISIBLE_EXPECT, expect),
            ("FAKE_DRIVER_VISIBLE_DEVICES", visible),
        ];
        run_child(
            &u,
            "ipc_in_a_process_that_numbers_the_gpus_another_way",
            &envs,
            fd,
        );
    }
    pooled.free(&stream).unwrap();
    malloced.free(&stream).unwrap();
}

fn ipc_handle_of_malloc_memory_and_refusals(p: &'static Platform) {
    let u = Under::new(p);
    let dev = p.dev(0);
    let stream = u.rt.create_stream(dev).unwrap();
    let sync = (p.sync_device)(u.fake_path(), dev).unwrap();
    let buf = DeviceBuffer::new(300, sync, &stream).unwrap();
    let handle = buf.ipc_handle().unwrap();
    assert_eq!(
        (handle.device(), handle.nbytes(), handle.exporter_pid()),
        (dev, 300, std::process::id())
    );
    assert_ne!(handle.handle_bytes(), &[0u8; 64]);
    // Its own process uses the buffer, not the handle.
    let err = DeviceBuffer::from_ipc_handle(&handle, &stream).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    assert!(
        err.to_string().contains("exported by this process"),
        "{err}"
    );
    // No pool descriptor for cudaMalloc memory: the refusal names the handle.
    let err = buf.ipc_descriptor().unwrap_err();
    assert!(err.to_string().contains("buffer.ipc_handle()"), "{err}");
    buf.free(&stream).unwrap();
    // An adaptor hands out its upstream's pointers: the handle is the upstream's.
    let counted: Arc<dyn MemoryResource> = Arc::new(StatisticsAdaptor::new(
        (p.sync_device)(u.fake_path(), dev).unwrap(),
    ));
    let buf = DeviceBuffer::new(64, counted, &stream).unwrap();
    assert_eq!(buf.ipc_handle().unwrap().nbytes(), 64);
    buf.free(&stream).unwrap();

    // Stream-ordered memory and an IPC pool's memory have no legacy handle.
    let ordered = u.rt.default_resource(dev).unwrap();
    assert!(ordered.stream_ordered());
    let pool = ipc_pool(&u, dev);
    for mr in [ordered, pool] {
        let buf = DeviceBuffer::new(64, mr, &stream).unwrap();
        let err = buf.ipc_handle().unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
        assert!(err.to_string().contains("async_alloc=False"), "{err}");
        buf.free(&stream).unwrap();
    }
    // A handle for a device no GPU allocator has.
    let cpu = devmm::ipc::IpcMemHandle::from_parts(Device::CPU, 8, [0; 64], 1);
    let err = DeviceBuffer::from_ipc_handle(&cpu, &stream).unwrap_err();
    assert!(err.to_string().contains("no GPU allocator"), "{err}");
    if let Some(fake) = u.fake() {
        assert_eq!(fake.call_count(&p.call("IpcGetMemHandle")), 2);
        assert_eq!(fake.call_count(&p.call("IpcOpenMemHandle")), 0);
    }
}

/// Set in the child `ipc_handle_round_trip_with_another_process` starts:
/// the handle's parts (`nbytes,pid,handle in hex`).
const IPC_HANDLE_CHILD: &str = "DEVMM_TEST_IPC_HANDLE_CHILD";

/// The child's side: opens the parent's buffer, reads it, writes to it,
/// and closes its mapping.
fn ipc_handle_child(p: &'static Platform, parts: &str) {
    let mut parts = parts.split(',');
    let mut next = || parts.next().expect("three parts");
    let nbytes: usize = next().parse().unwrap();
    let pid: u32 = next().parse().unwrap();
    let hex = next();
    let mut bytes = [0u8; 64];
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
    }
    let dev = p.dev(0);
    let handle = devmm::ipc::IpcMemHandle::from_parts(dev, nbytes, bytes, pid);
    let stream = devmm::runtime::stream_for(dev, None).unwrap();
    let opened = DeviceBuffer::from_ipc_handle(&handle, &stream).unwrap();
    assert!(opened.is_foreign());
    let mut seen = vec![0u8; nbytes];
    // SAFETY: `seen` holds the buffer's bytes; device memory is copied.
    unsafe { opened.copy_to_host(&mut seen) }.unwrap();
    assert_eq!(seen, b"parent bytes");
    // Opened again, the driver returns the same pointer and counts the
    // opening: closing one leaves the other mapped.
    let again = DeviceBuffer::from_ipc_handle(&handle, &stream).unwrap();
    assert_eq!(again.ptr(), opened.ptr());
    opened.free(&stream).unwrap();
    // SAFETY: as above.
    unsafe { again.copy_from_host(b"CHILD") }.unwrap();
    again.free(&stream).unwrap();
}

fn ipc_handle_round_trip_with_another_process(p: &'static Platform) {
    if let Ok(parts) = std::env::var(IPC_HANDLE_CHILD) {
        return ipc_handle_child(p, &parts);
    }
    let u = Under::new(p);
    let dev = p.dev(0);
    let stream = u.rt.create_stream(dev).unwrap();
    let sync = (p.sync_device)(u.fake_path(), dev).unwrap();
    let buf = DeviceBuffer::new(12, sync, &stream).unwrap();
    // SAFETY: a 12-byte device buffer, copied from the host.
    unsafe { buf.copy_from_host(b"parent bytes") }.unwrap();
    stream.synchronize().unwrap();
    let handle = buf.ipc_handle().unwrap();
    let hex: String = handle
        .handle_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap());
    child
        .args([
            "--exact",
            &format!("{}::ipc_handle_round_trip_with_another_process", p.runtime),
            "--nocapture",
        ])
        .env(
            IPC_HANDLE_CHILD,
            format!("{},{},{hex}", handle.nbytes(), handle.exporter_pid()),
        );
    if let Some(path) = u.fake_path() {
        child.env(p.path_var, path);
    }
    let output = child.output().unwrap();
    assert!(
        output.status.success(),
        "the opening process failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("1 passed"));
    // The child's write is here, and its close left the memory alone.
    let mut back = [0u8; 12];
    // SAFETY: `back` holds the buffer's 12 bytes.
    unsafe { buf.copy_to_host(&mut back) }.unwrap();
    assert_eq!(&back, b"CHILDt bytes");
    buf.free(&stream).unwrap();
}

macro_rules! suite {
    ($($module:ident, $platform:ident);*) => {$(
        platform_tests!($module, $platform:
            device_count_and_memory_info,
            streams_carry_their_runtime,
            activation_guard_restores_the_previous_device,
            the_callers_device_is_current_again_after_devmm_used_another,
            streams_created_wrapped_and_builtin,
            stream_flags_reach_the_driver,
            memcpy_of_every_kind,
            raw_memcpy_of_every_kind,
            raw_memcpy_refusals,
            resource_contract,
            conformance_suite,
            out_of_memory_names_device_size_and_chain,
            a_driver_out_of_memory_is_recovered_by_a_failure_callback,
            stream_handoff_records_then_waits,
            driver_errors_name_call_code_and_device,
            stream_ordered_allocation_when_present,
            synchronous_allocation_without_async_symbols,
            pinned_and_managed_resources,
            pinned_memory_from_a_host_pool_where_the_runtime_has_one,
            host_views_of_pinned_memory_wait_for_its_stream,
            host_consumers_of_pinned_memory_wait_for_its_stream,
            host_views_of_managed_memory_wait_for_the_device_without_concurrent_access,
            pinned_host_pool_trim_and_high_water_marks,
            managed_memory_prefetch_and_advice,
            prefetch_adaptor_prefetches_each_allocation,
            missing_library_is_runtime_unavailable,
            a_child_forked_after_the_runtime_started_is_refused,
            own_pool_figures_after_freeing_the_middle_of_three_blocks,
            own_pool_figures_in_the_profilers_report,
            own_pool_settings_and_refusals,
            own_pool_driver_calls,
            ipc_descriptor_of_an_ipc_pool_and_refusals,
            ipc_round_trip_with_another_process,
            ipc_handle_of_malloc_memory_and_refusals,
            ipc_handle_round_trip_with_another_process,
            ipc_in_a_process_that_numbers_the_gpus_another_way,
        );
    )*};
}

suite!(cuda, CUDA; rocm, ROCM);

#[test]
fn missing_required_symbols_are_all_listed_in_one_error() {
    let path = &fake_libraries().cudart_minimal;
    let err = CudaRuntime::open(path).unwrap_err();
    let Error::RuntimeUnavailable { name, reason } = &err else {
        panic!("expected runtime unavailable, got {err:?}");
    };
    assert_eq!(name, "cuda");
    let missing = [
        ("cudaGetDevice", "1.0"),
        ("cudaSetDevice", "1.0"),
        ("cudaMemGetInfo", "3.0"),
        ("cudaDeviceGetAttribute", "5.0"),
        ("cudaDeviceGetPCIBusId", "4.1"),
        ("cudaDeviceSynchronize", "1.0"),
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
        ("cudaGetLastError", "1.0"),
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
    let u = Under::new(&CUDA);
    let (rt, dev) = (&u.rt, CUDA.dev(0));
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
    assert!(
        consumer(Some(0))
            .unwrap_err()
            .to_string()
            .contains("disallowed for CUDA")
    );
}

#[test]
fn rocm_stream_sentinels_and_dlpack_stream_values() {
    let u = Under::new(&ROCM);
    let (rt, dev) = (&u.rt, ROCM.dev(0));
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

/// A driver version appears only where a kernel driver answered (issue 29,
/// defect 8): CUDA's `cudaDriverGetVersion` is the driver's answer (0 when
/// none is installed); HIP's `hipDriverGetVersion` is HIP's own version on
/// AMD, so ROCm's driver version is the amdgpu kernel module's, where it
/// says one.
#[test]
fn a_driver_version_appears_only_where_a_kernel_driver_answered() {
    if CUDA.on_hardware() || ROCM.on_hardware() {
        return skipped_on_hardware("reads the fakes' versions");
    }
    let u = Under::new(&CUDA);
    let versions = u.rt.library_versions().unwrap().expect("CUDA has versions");
    assert_eq!(
        (versions.driver.as_deref(), versions.driver_code),
        (Some("12.4"), Some(12040))
    );
    u.fake().unwrap().set_version(12040, 0);
    let none = CudaRuntime::open(u.fake_path().unwrap()).unwrap();
    let versions = none.library_versions().unwrap().expect("CUDA has versions");
    assert_eq!(versions.runtime, "12.4");
    assert_eq!((versions.driver, versions.driver_code), (None, None));
    drop(u);

    let u = Under::new(&ROCM);
    let versions = u.rt.library_versions().unwrap().expect("HIP has versions");
    assert_eq!(versions.runtime, "6.2.41133");
    let amdgpu = std::fs::read_to_string("/sys/module/amdgpu/version")
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty());
    assert_eq!(
        versions.driver, amdgpu,
        "HIP's own version is not the kernel driver's"
    );
    assert_eq!(versions.driver_code, None);
}

#[test]
fn versions_and_library_path() {
    if CUDA.on_hardware() {
        return skipped_on_hardware("reads the fakes' versions");
    }
    let _u = Under::new(&CUDA);
    let libraries = fake_libraries();
    let rt = CudaRuntime::open(&libraries.cudart).unwrap();
    let (runtime, driver) = rt.versions().unwrap();
    assert!(runtime > 0 && driver >= runtime, "{runtime} {driver}");
    assert_eq!(rt.library_path(), libraries.cudart.as_os_str());
    assert!(rt.has_stream_ordered_allocation());
    let sync = CudaRuntime::open(&libraries.cudart_sync).unwrap();
    assert!(!sync.has_stream_ordered_allocation());
}
