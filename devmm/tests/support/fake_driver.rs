//! The fake CUDA runtime and HIP libraries (`tests/fake-*`), built and located on demand, and a
//! typed handle on their `fake_*` control API.
//!
//! # Finding the libraries
//! [`fake_libraries()`] runs `cargo build -p fake-cudart -p fake-cudart-sync
//! -p fake-cudart-minimal -p fake-hip -p fake-hip-sync` once per test process (later calls wait
//! for and reuse the first result), with the cargo that runs the tests and into the same target
//! directory: `CARGO_TARGET_DIR` if set (a relative one is taken from the workspace root), else
//! `<workspace>/target`. So `cargo test -p devmm` works on a fresh clone with no extra step; the
//! build is a no-op when the libraries are up to date. The libraries are in
//! `<target>/debug/libfake_*.so`:
//!
//! | field            | library                       | exports                                      |
//! |------------------|-------------------------------|----------------------------------------------|
//! | `cudart`         | `libfake_cudart.so`           | every CUDA symbol devmm uses                 |
//! | `cudart_sync`    | `libfake_cudart_sync.so`      | the same without `cudaMallocAsync`/`cudaFreeAsync` |
//! | `cudart_minimal` | `libfake_cudart_minimal.so`   | only `cudaGetDeviceCount`, `cudaRuntimeGetVersion`, `cudaDriverGetVersion`, `cudaGetErrorName`, `cudaGetErrorString` |
//! | `hip`            | `libfake_hip.so`              | every HIP symbol devmm uses                  |
//! | `hip_sync`       | `libfake_hip_sync.so`         | the same without `hipMallocAsync`/`hipFreeAsync` |
//!
//! Every one also exports the control API that [`FakeControl`] wraps.
//!
//! # Sharing one fake between tests
//! A fake's state (devices, memory, handles, call log) is per library and process-wide, and
//! `dlopen` of one path returns one instance: the loader under test and a [`FakeControl`] opened
//! on the same path see the same state. Tests in one binary run on parallel threads, so each test
//! that uses a fake holds [`exclusive()`] for its whole body and starts with
//! [`FakeControl::reset`].
//!
//! ```text
//! mod support;
//! use support::fake_driver::{exclusive, fake_libraries, FakeControl};
//!
//! let _serial = exclusive();
//! let fake = FakeControl::open(&fake_libraries().cudart);
//! fake.reset();
//! fake.set_memory_limit(0, 1 << 20);
//! // ... point devmm's loader at fake_libraries().cudart, run, then:
//! assert_eq!(fake.call_count("cudaMalloc"), 1);
//! ```

// Each test binary uses a different part of this module.
#![allow(dead_code)]

use std::ffi::{CString, c_char, c_int};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use libloading::Library;

/// Paths of the built fake libraries (see the module docs for what each exports).
#[derive(Debug)]
pub(crate) struct FakeLibraries {
    pub(crate) cudart: PathBuf,
    pub(crate) cudart_sync: PathBuf,
    pub(crate) cudart_minimal: PathBuf,
    pub(crate) hip: PathBuf,
    pub(crate) hip_sync: PathBuf,
}

const PACKAGES: [&str; 5] = [
    "fake-cudart",
    "fake-cudart-sync",
    "fake-cudart-minimal",
    "fake-hip",
    "fake-hip-sync",
];

/// Builds the fakes once per process and returns their paths. Panics with cargo's output if
/// the build fails: no test of a GPU runtime can run without them.
pub(crate) fn fake_libraries() -> &'static FakeLibraries {
    static BUILT: OnceLock<Result<FakeLibraries, String>> = OnceLock::new();
    match BUILT.get_or_init(build) {
        Ok(libraries) => libraries,
        Err(why) => panic!("building the fake driver libraries failed: {why}"),
    }
}

/// Serialises the tests of one process that use a fake (their state is process-wide).
pub(crate) fn exclusive() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    // A test that failed while holding the lock leaves nothing to repair: the next test resets.
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

fn workspace_root() -> &'static Path {
    // devmm/ sits directly under the workspace root.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("devmm's manifest directory has a parent")
}

fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => workspace_root().join(dir),
        None => workspace_root().join("target"),
    }
}

/// Where prebuilt fakes are taken from instead of building them (the GPU
/// bundle ships them to machines without a Rust toolchain).
const PREBUILT_ENV: &str = "DEVMM_TEST_FAKES_DIR";

fn build() -> Result<FakeLibraries, String> {
    if let Some(dir) = std::env::var_os(PREBUILT_ENV) {
        return locate(&PathBuf::from(dir));
    }
    let target = target_dir();
    let mut cargo = Command::new(env!("CARGO"));
    cargo
        .current_dir(workspace_root())
        .arg("build")
        .arg("--target-dir")
        .arg(&target);
    for package in PACKAGES {
        cargo.args(["-p", package]);
    }
    let output = cargo
        .output()
        .map_err(|err| format!("could not run {}: {err}", env!("CARGO")))?;
    if !output.status.success() {
        return Err(format!(
            "{:?} exited with {}:\n{}",
            cargo,
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    locate(&target.join("debug"))
}

/// The fakes' files in `dir`.
fn locate(dir: &Path) -> Result<FakeLibraries, String> {
    let library = |package: &str| {
        let path = dir.join(format!("lib{}.so", package.replace('-', "_")));
        if path.is_file() {
            Ok(path)
        } else {
            Err(format!("{package} is missing: no {}", path.display()))
        }
    };
    Ok(FakeLibraries {
        cudart: library("fake-cudart")?,
        cudart_sync: library("fake-cudart-sync")?,
        cudart_minimal: library("fake-cudart-minimal")?,
        hip: library("fake-hip")?,
        hip_sync: library("fake-hip-sync")?,
    })
}

/// The `fake_*` control API of one loaded fake library.
#[derive(Debug)]
pub(crate) struct FakeControl {
    library: Library,
}

impl FakeControl {
    /// Loads the fake at `path` once per process and keeps it loaded for good: a Rust cdylib
    /// must not be unloaded while threads that called into it may still exit (their TLS
    /// destructors would run unmapped code), and every later `open` shares the same instance.
    pub(crate) fn open(path: &Path) -> &'static Self {
        static OPEN: Mutex<Vec<(PathBuf, &'static FakeControl)>> = Mutex::new(Vec::new());
        let mut open = OPEN.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, control)) = open.iter().find(|(loaded, _)| loaded == path) {
            return control;
        }
        // SAFETY: the fakes are Rust cdylibs without initialisation routines with preconditions.
        let library = unsafe { Library::new(path) }
            .unwrap_or_else(|err| panic!("cannot load {}: {err}", path.display()));
        let control: &'static FakeControl = Box::leak(Box::new(Self { library }));
        open.push((path.to_owned(), control));
        control
    }

    /// The library itself, to resolve the platform symbols (`cudaMalloc`...) directly.
    pub(crate) fn library(&self) -> &Library {
        &self.library
    }

    /// Resolves `name` as a function pointer of type `F`.
    ///
    /// # Safety
    /// `F` is the symbol's real C signature.
    pub(crate) unsafe fn function<F: Copy>(&self, name: &str) -> F {
        // SAFETY: the caller names the right signature; the function pointer stays valid because
        // `open` never unloads a library.
        unsafe { self.library.get::<F>(name) }
            .map(|symbol| *symbol)
            .unwrap_or_else(|err| panic!("symbol {name} is missing: {err}"))
    }

    /// `fake_reset()`: frees all memory, destroys all handles, clears log, counters and pending
    /// failures; 2 devices with 1 GiB each; every thread back on device 0; default versions.
    pub(crate) fn reset(&self) {
        // SAFETY: `void fake_reset(void)`.
        unsafe { self.function::<extern "C" fn()>("fake_reset")() }
    }

    /// `fake_set_device_count(int) -> int`: 0 on success, -1 outside 0..=64.
    pub(crate) fn set_device_count(&self, count: c_int) -> c_int {
        // SAFETY: `int fake_set_device_count(int)`.
        unsafe { self.function::<extern "C" fn(c_int) -> c_int>("fake_set_device_count")(count) }
    }

    /// `fake_set_memory_limit(int device, uint64_t bytes) -> int`: 0, or -1 for a bad device.
    pub(crate) fn set_memory_limit(&self, device: c_int, bytes: u64) -> c_int {
        // SAFETY: `int fake_set_memory_limit(int, uint64_t)`.
        let set =
            unsafe { self.function::<extern "C" fn(c_int, u64) -> c_int>("fake_set_memory_limit") };
        set(device, bytes)
    }

    /// `fake_set_version(int runtime, int driver)`.
    pub(crate) fn set_version(&self, runtime: c_int, driver: c_int) {
        // SAFETY: `void fake_set_version(int, int)`.
        unsafe { self.function::<extern "C" fn(c_int, c_int)>("fake_set_version")(runtime, driver) }
    }

    /// `fake_fail_next(const char* name, int status) -> int`: the next call of `name` returns
    /// `status` and does nothing else.
    pub(crate) fn fail_next(&self, name: &str, status: c_int) -> c_int {
        let name = c_name(name);
        // SAFETY: `int fake_fail_next(const char*, int)`, given a NUL-terminated string.
        unsafe {
            self.function::<unsafe extern "C" fn(*const c_char, c_int) -> c_int>("fake_fail_next")(
                name.as_ptr(),
                status,
            )
        }
    }

    /// `fake_fail_nth(const char* name, uint64_t nth, int status) -> int`: the `nth` (1-based)
    /// next call of `name` returns `status`; -1 for `nth` 0.
    pub(crate) fn fail_nth(&self, name: &str, nth: u64, status: c_int) -> c_int {
        let name = c_name(name);
        // SAFETY: `int fake_fail_nth(const char*, uint64_t, int)`, given a NUL-terminated string.
        unsafe {
            self.function::<unsafe extern "C" fn(*const c_char, u64, c_int) -> c_int>(
                "fake_fail_nth",
            )(name.as_ptr(), nth, status)
        }
    }

    /// `fake_call_count(const char* name) -> uint64_t`.
    pub(crate) fn call_count(&self, name: &str) -> u64 {
        let name = c_name(name);
        // SAFETY: `uint64_t fake_call_count(const char*)`, given a NUL-terminated string.
        unsafe {
            self.function::<unsafe extern "C" fn(*const c_char) -> u64>("fake_call_count")(
                name.as_ptr(),
            )
        }
    }

    /// The call log through `fake_call_log(char* buf, size_t cap) -> size_t`, one call per line:
    /// `name key=value ... -> status`.
    pub(crate) fn call_log(&self) -> Vec<String> {
        // SAFETY: `size_t fake_call_log(char*, size_t)`.
        let read = unsafe {
            self.function::<unsafe extern "C" fn(*mut c_char, usize) -> usize>("fake_call_log")
        };
        // SAFETY: a null buffer only measures.
        let mut buf = vec![0u8; unsafe { read(std::ptr::null_mut(), 0) } + 1];
        // SAFETY: `buf` holds `buf.len()` writable bytes.
        let len = unsafe { read(buf.as_mut_ptr().cast(), buf.len()) };
        // The log can only have grown if another thread called in; `exclusive()` prevents that.
        assert!(len < buf.len(), "the call log grew while it was read");
        buf.truncate(len);
        String::from_utf8_lossy(&buf)
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// `fake_clear_calls()`: forgets the log and the counters, keeps everything else.
    pub(crate) fn clear_calls(&self) {
        // SAFETY: `void fake_clear_calls(void)`.
        unsafe { self.function::<extern "C" fn()>("fake_clear_calls")() }
    }

    /// `fake_set_strict(int)`: with `false`, dead handles are errors instead of an abort (until
    /// the next reset).
    pub(crate) fn set_strict(&self, on: bool) {
        // SAFETY: `void fake_set_strict(int)`.
        unsafe { self.function::<extern "C" fn(c_int)>("fake_set_strict")(c_int::from(on)) }
    }

    /// `fake_set_no_driver(int)`: every status call fails with insufficient-driver (35).
    pub(crate) fn set_no_driver(&self, on: bool) {
        // SAFETY: `void fake_set_no_driver(int)`.
        unsafe { self.function::<extern "C" fn(c_int)>("fake_set_no_driver")(c_int::from(on)) }
    }

    /// `fake_set_unified_addressing(int device, int on) -> int`.
    pub(crate) fn set_unified_addressing(&self, device: c_int, on: bool) -> c_int {
        // SAFETY: `int fake_set_unified_addressing(int, int)`.
        let set = unsafe {
            self.function::<extern "C" fn(c_int, c_int) -> c_int>("fake_set_unified_addressing")
        };
        set(device, c_int::from(on))
    }

    /// `fake_set_concurrent_managed_access(int device, int on) -> int`: 0 on success.
    pub(crate) fn set_concurrent_managed_access(&self, device: c_int, on: bool) -> c_int {
        // SAFETY: `int fake_set_concurrent_managed_access(int, int)`.
        unsafe {
            self.function::<extern "C" fn(c_int, c_int) -> c_int>(
                "fake_set_concurrent_managed_access",
            )(device, c_int::from(on))
        }
    }

    /// `fake_set_pools(int device, int supported) -> int`.
    pub(crate) fn set_pools(&self, device: c_int, supported: bool) -> c_int {
        // SAFETY: `int fake_set_pools(int, int)`.
        let set =
            unsafe { self.function::<extern "C" fn(c_int, c_int) -> c_int>("fake_set_pools") };
        set(device, c_int::from(supported))
    }

    /// `fake_set_host_numa_id(int device, int node)`: the host NUMA node closest to `device`.
    pub(crate) fn set_host_numa_id(&self, device: c_int, node: c_int) -> c_int {
        // SAFETY: `int fake_set_host_numa_id(int, int)`.
        let set = unsafe {
            self.function::<extern "C" fn(c_int, c_int) -> c_int>("fake_set_host_numa_id")
        };
        set(device, node)
    }

    /// `fake_set_stream_delay(uint64_t micros)`: each item of stream work waits this long.
    pub(crate) fn set_stream_delay(&self, micros: u64) {
        // SAFETY: `void fake_set_stream_delay(uint64_t)`.
        unsafe { self.function::<extern "C" fn(u64)>("fake_set_stream_delay")(micros) }
    }

    /// `fake_hold_work(int on)`: while on, the work this thread queues waits for
    /// [`FakeControl::release_work`] before it runs.
    pub(crate) fn hold_work(&self, on: bool) {
        // SAFETY: `void fake_hold_work(int)`.
        unsafe { self.function::<extern "C" fn(c_int)>("fake_hold_work")(c_int::from(on)) }
    }

    /// `fake_release_work()`: the work held so far runs.
    pub(crate) fn release_work(&self) {
        // SAFETY: `void fake_release_work(void)`.
        unsafe { self.function::<extern "C" fn()>("fake_release_work")() }
    }

    /// `fake_has_context(int device) -> int`: 1, 0, or -1 for no such device.
    pub(crate) fn has_context(&self, device: c_int) -> c_int {
        // SAFETY: `int fake_has_context(int)`.
        unsafe { self.function::<extern "C" fn(c_int) -> c_int>("fake_has_context")(device) }
    }

    /// `fake_last_error() -> int`: the calling thread's last error, not cleared.
    pub(crate) fn last_error(&self) -> c_int {
        // SAFETY: `int fake_last_error(void)`.
        unsafe { self.function::<extern "C" fn() -> c_int>("fake_last_error")() }
    }

    /// `fake_live_pools() -> uint64_t`: pools made with `*MemPoolCreate` not yet gone.
    pub(crate) fn live_pools(&self) -> u64 {
        // SAFETY: `uint64_t fake_live_pools(void)`.
        unsafe { self.function::<extern "C" fn() -> u64>("fake_live_pools")() }
    }

    /// `fake_live_allocations() -> uint64_t`: device, managed and pinned host blocks alive.
    pub(crate) fn live_allocations(&self) -> u64 {
        // SAFETY: `uint64_t fake_live_allocations(void)`.
        unsafe { self.function::<extern "C" fn() -> u64>("fake_live_allocations")() }
    }
}

fn c_name(name: &str) -> CString {
    CString::new(name).expect("function names have no NUL byte")
}
