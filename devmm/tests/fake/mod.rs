//! The fake driver libraries from `tests/` (fake-cudart, fake-hip and their
//! reduced variants), built on first use and opened for their `fake_*`
//! control API.
//!
//! The libraries are built by a nested `cargo build` into
//! `CARGO_TARGET_TMPDIR/fake-drivers` (its own target directory, so it never
//! waits on the lock of the `cargo test` that runs us), which makes
//! `cargo test -p devmm` self-sufficient on a fresh clone. Set
//! `DEVMM_FAKE_LIB_DIR` to a directory holding prebuilt libraries to skip
//! the build.
//!
//! The fakes keep process-wide state per library, so tests take the
//! library's lock ([`Fake::lock`]) for their whole body; it also resets
//! the fake to two devices with 1 GiB each.

#![allow(dead_code)] // each test binary uses its own part of this module

use std::ffi::{c_char, c_int, CString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};

/// Every fake library package, built together.
const PACKAGES: [&str; 5] = [
    "fake-cudart",
    "fake-cudart-sync",
    "fake-cudart-minimal",
    "fake-hip",
    "fake-hip-sync",
];

/// The directory holding the built libraries.
fn lib_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(dir) = std::env::var_os("DEVMM_FAKE_LIB_DIR") {
            return PathBuf::from(dir);
        }
        let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fake-drivers");
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut cargo = Command::new(env!("CARGO"));
        cargo
            .current_dir(&workspace)
            .args(["build", "--quiet", "--target-dir"])
            .arg(&target);
        for package in PACKAGES {
            cargo.args(["-p", package]);
        }
        let status = cargo
            .status()
            .unwrap_or_else(|e| panic!("cannot run cargo to build the fake drivers: {e}"));
        assert!(
            status.success(),
            "building the fake drivers failed: {status}"
        );
        target.join("debug")
    })
}

/// The path of the library built from `package` (`fake-cudart` ->
/// `libfake_cudart.so`).
pub(crate) fn path(package: &str) -> PathBuf {
    lib_dir().join(format!("lib{}.so", package.replace('-', "_")))
}

/// A fake library's control API, opened by path: the same instance the
/// runtime under test loads from that path.
pub(crate) struct Fake {
    pub(crate) path: PathBuf,
    lib: libloading::Library,
}

fn locks() -> &'static Mutex<()> {
    static LOCK: Mutex<()> = Mutex::new(());
    &LOCK
}

impl Fake {
    /// Opens the fake built from `package`, serializes with every other test
    /// of this binary using a fake, and resets it.
    pub(crate) fn lock(package: &str) -> (Fake, MutexGuard<'static, ()>) {
        let guard = locks().lock().unwrap_or_else(|e| e.into_inner());
        let path = path(package);
        use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
        // SAFETY: the fakes' initializers only set up their own state. Never
        // unmapped (NODELETE): the fakes keep thread-local state whose
        // destructors run at thread exit, after this handle is gone.
        let lib: libloading::Library =
            unsafe { Library::open(Some(&path), RTLD_NOW | RTLD_LOCAL | libc::RTLD_NODELETE) }
                .unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()))
                .into();
        let fake = Fake { path, lib };
        fake.reset();
        (fake, guard)
    }

    fn symbol<T: Copy>(&self, name: &str) -> T {
        // SAFETY: the `fake_*` symbols have the signatures the callers below
        // give them (see fake_driver::control).
        unsafe {
            *self
                .lib
                .get::<T>(name.as_bytes())
                .unwrap_or_else(|e| panic!("{name}: {e}"))
        }
    }

    pub(crate) fn reset(&self) {
        let f: extern "C" fn() = self.symbol("fake_reset");
        f()
    }

    pub(crate) fn set_device_count(&self, count: i32) {
        let f: extern "C" fn(c_int) -> c_int = self.symbol("fake_set_device_count");
        assert_eq!(f(count), 0, "fake_set_device_count({count})");
    }

    pub(crate) fn set_memory_limit(&self, device: i32, bytes: u64) {
        let f: extern "C" fn(c_int, u64) -> c_int = self.symbol("fake_set_memory_limit");
        assert_eq!(
            f(device, bytes),
            0,
            "fake_set_memory_limit({device}, {bytes})"
        );
    }

    /// The next call of `name` fails with `status`.
    pub(crate) fn fail_next(&self, name: &str, status: i32) {
        let f: unsafe extern "C" fn(*const c_char, c_int) -> c_int = self.symbol("fake_fail_next");
        let name = CString::new(name).unwrap();
        // SAFETY: `name` is NUL-terminated.
        assert_eq!(unsafe { f(name.as_ptr(), status) }, 0);
    }

    pub(crate) fn calls(&self, name: &str) -> u64 {
        let f: unsafe extern "C" fn(*const c_char) -> u64 = self.symbol("fake_call_count");
        let name = CString::new(name).unwrap();
        // SAFETY: `name` is NUL-terminated.
        unsafe { f(name.as_ptr()) }
    }

    /// The call log, one call per entry (`name key=value ... -> status`).
    pub(crate) fn log(&self) -> Vec<String> {
        let f: unsafe extern "C" fn(*mut c_char, usize) -> usize = self.symbol("fake_call_log");
        // SAFETY: a null buffer only measures.
        let len = unsafe { f(std::ptr::null_mut(), 0) };
        let mut buf = vec![0u8; len + 1];
        // SAFETY: `buf` holds `len + 1` bytes.
        unsafe { f(buf.as_mut_ptr().cast(), buf.len()) };
        buf.truncate(len);
        String::from_utf8(buf)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// The log lines of calls to `name` (the name is the line's first word).
    pub(crate) fn log_of(&self, name: &str) -> Vec<String> {
        self.log()
            .into_iter()
            .filter(|l| l.split(' ').next() == Some(name))
            .collect()
    }

    pub(crate) fn clear_calls(&self) {
        let f: extern "C" fn() = self.symbol("fake_clear_calls");
        f()
    }

    pub(crate) fn live_allocations(&self) -> u64 {
        let f: extern "C" fn() -> u64 = self.symbol("fake_live_allocations");
        f()
    }
}
