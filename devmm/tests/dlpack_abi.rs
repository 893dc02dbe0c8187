//! The `repr(C)` mirrors in `devmm::dlpack::ffi` against the official
//! `dlpack.h`, compiled by the C compiler.
//!
//! The header is not in this repository: it comes from a registry package
//! installed at test-setup time. `python3 -m pip install apache-tvm-ffi==0.1.15.post2`
//! ships the upstream header (`tvm-ffi-config --dlpack-includedir`); any
//! directory holding `dlpack/dlpack.h` of DLPack 1.3 or newer can be named
//! with `DEVMM_DLPACK_INCLUDE` instead.

use std::collections::BTreeMap;
use std::mem::{align_of, offset_of, size_of};
use std::path::{Path, PathBuf};
use std::process::Command;

use devmm::dlpack::ffi::{
    DLDataType, DLDevice, DLManagedTensor, DLManagedTensorVersioned,
    DLPACK_EXCHANGE_API_MINOR_VERSION, DLPACK_FLAG_BITMASK_IS_COPIED,
    DLPACK_FLAG_BITMASK_READ_ONLY, DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION, DLPackExchangeAPI,
    DLPackExchangeAPIHeader, DLPackVersion, DLTensor,
};
use devmm::{DTypeCode, DeviceType};

const INSTALL: &str = "install the official header with `python3 -m pip install apache-tvm-ffi==0.1.15.post2` \
    (it ships dlpack/dlpack.h; `tvm-ffi-config --dlpack-includedir` prints where), or set \
    DEVMM_DLPACK_INCLUDE to a directory holding dlpack/dlpack.h of DLPack 1.3 or newer";

/// Where `dlpack/dlpack.h` is, in order: the env override, then the
/// directory tvm-ffi reports (its console script, then its module).
fn header_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("DEVMM_DLPACK_INCLUDE") {
        let dir = PathBuf::from(dir);
        assert!(
            dir.join("dlpack/dlpack.h").is_file(),
            "DEVMM_DLPACK_INCLUDE={} holds no dlpack/dlpack.h; {INSTALL}",
            dir.display()
        );
        return dir;
    }
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let probes: [(&str, &[&str]); 2] = [
        ("tvm-ffi-config", &["--dlpack-includedir"]),
        (&python, &["-m", "tvm_ffi.config", "--dlpack-includedir"]),
    ];
    for (program, args) in probes {
        let Ok(out) = Command::new(program).args(args).output() else {
            continue;
        };
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if out.status.success() && dir.join("dlpack/dlpack.h").is_file() {
            return dir;
        }
    }
    panic!("the official dlpack.h was not found; {INSTALL}");
}

/// The C side: every size, alignment, offset and constant the mirrors rely on.
const PROBE: &str = r#"
#include <stdio.h>
#include <stddef.h>
#include <dlpack/dlpack.h>

#if DLPACK_MAJOR_VERSION != 1 || DLPACK_MINOR_VERSION < 3
#error "devmm mirrors DLPack 1.1 and the 1.3 exchange API: this dlpack.h is of another ABI"
#endif

#define LAYOUT(T) \
    printf("size %s %zu\n", #T, sizeof(T)); \
    printf("align %s %zu\n", #T, _Alignof(T));
#define FIELD(T, f) \
    printf("offset %s.%s %zu\n", #T, #f, offsetof(T, f)); \
    printf("fieldsize %s.%s %zu\n", #T, #f, sizeof(((T *)0)->f));
#define CONST(c) printf("const %s %llu\n", #c, (unsigned long long)(c));

int main(void) {
    LAYOUT(DLPackVersion) FIELD(DLPackVersion, major) FIELD(DLPackVersion, minor)
    LAYOUT(DLDevice) FIELD(DLDevice, device_type) FIELD(DLDevice, device_id)
    LAYOUT(DLDataType) FIELD(DLDataType, code) FIELD(DLDataType, bits) FIELD(DLDataType, lanes)
    LAYOUT(DLTensor) FIELD(DLTensor, data) FIELD(DLTensor, device) FIELD(DLTensor, ndim)
        FIELD(DLTensor, dtype) FIELD(DLTensor, shape) FIELD(DLTensor, strides)
        FIELD(DLTensor, byte_offset)
    LAYOUT(DLManagedTensor) FIELD(DLManagedTensor, dl_tensor)
        FIELD(DLManagedTensor, manager_ctx) FIELD(DLManagedTensor, deleter)
    LAYOUT(DLManagedTensorVersioned) FIELD(DLManagedTensorVersioned, version)
        FIELD(DLManagedTensorVersioned, manager_ctx) FIELD(DLManagedTensorVersioned, deleter)
        FIELD(DLManagedTensorVersioned, flags) FIELD(DLManagedTensorVersioned, dl_tensor)
    LAYOUT(DLPackExchangeAPIHeader) FIELD(DLPackExchangeAPIHeader, version)
        FIELD(DLPackExchangeAPIHeader, prev_api)
    LAYOUT(DLPackExchangeAPI) FIELD(DLPackExchangeAPI, header)
        FIELD(DLPackExchangeAPI, managed_tensor_allocator)
        FIELD(DLPackExchangeAPI, managed_tensor_from_py_object_no_sync)
        FIELD(DLPackExchangeAPI, managed_tensor_to_py_object_no_sync)
        FIELD(DLPackExchangeAPI, dltensor_from_py_object_no_sync)
        FIELD(DLPackExchangeAPI, current_work_stream)
    CONST(DLPACK_MAJOR_VERSION)
    CONST(DLPACK_FLAG_BITMASK_READ_ONLY) CONST(DLPACK_FLAG_BITMASK_IS_COPIED)
    CONST(kDLCPU) CONST(kDLCUDA) CONST(kDLCUDAHost) CONST(kDLROCM) CONST(kDLROCMHost)
    CONST(kDLCUDAManaged)
    CONST(kDLInt) CONST(kDLUInt) CONST(kDLFloat) CONST(kDLOpaqueHandle) CONST(kDLBfloat)
    CONST(kDLComplex) CONST(kDLBool)
    return 0;
}
"#;

/// Compiles and runs the probe against the header in `include`.
fn c_facts(include: &Path) -> BTreeMap<String, u64> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dlpack_abi");
    std::fs::create_dir_all(&dir).expect("create the probe directory");
    let source = dir.join("probe.c");
    let binary = dir.join("probe");
    std::fs::write(&source, PROBE).expect("write the probe");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let compiled = Command::new(&cc)
        .args(["-std=c11", "-Wall", "-Werror", "-I"])
        .arg(include)
        .arg(&source)
        .arg("-o")
        .arg(&binary)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler {cc:?}: {e}; install gcc"));
    assert!(
        compiled.status.success(),
        "compiling the probe against {} failed:\n{}",
        include.display(),
        String::from_utf8_lossy(&compiled.stderr)
    );
    let ran = Command::new(&binary).output().expect("run the probe");
    assert!(ran.status.success(), "the probe failed");
    String::from_utf8(ran.stdout)
        .expect("ASCII output")
        .lines()
        .map(|line| {
            let (key, value) = line.rsplit_once(' ').expect("`key value` lines");
            (key.to_owned(), value.parse().expect("a number"))
        })
        .collect()
}

/// The same facts as Rust sees them.
fn rust_facts() -> BTreeMap<String, u64> {
    let mut facts = BTreeMap::new();
    let mut put = |key: String, value: usize| {
        facts.insert(key, value as u64);
    };
    macro_rules! layout {
        ($t:ty) => {
            put(format!("size {}", stringify!($t)), size_of::<$t>());
            put(format!("align {}", stringify!($t)), align_of::<$t>());
        };
    }
    macro_rules! field {
        ($t:ident, $f:ident) => {
            put(
                format!("offset {}.{}", stringify!($t), stringify!($f)),
                offset_of!($t, $f),
            );
            let probe = std::mem::MaybeUninit::<$t>::uninit();
            // SAFETY: only the field's address is taken, never read.
            let size = size_of_field(unsafe { std::ptr::addr_of!((*probe.as_ptr()).$f) });
            put(
                format!("fieldsize {}.{}", stringify!($t), stringify!($f)),
                size,
            );
        };
    }
    fn size_of_field<F>(_: *const F) -> usize {
        size_of::<F>()
    }
    layout!(DLPackVersion);
    field!(DLPackVersion, major);
    field!(DLPackVersion, minor);
    layout!(DLDevice);
    field!(DLDevice, device_type);
    field!(DLDevice, device_id);
    layout!(DLDataType);
    field!(DLDataType, code);
    field!(DLDataType, bits);
    field!(DLDataType, lanes);
    layout!(DLTensor);
    field!(DLTensor, data);
    field!(DLTensor, device);
    field!(DLTensor, ndim);
    field!(DLTensor, dtype);
    field!(DLTensor, shape);
    field!(DLTensor, strides);
    field!(DLTensor, byte_offset);
    layout!(DLManagedTensor);
    field!(DLManagedTensor, dl_tensor);
    field!(DLManagedTensor, manager_ctx);
    field!(DLManagedTensor, deleter);
    layout!(DLManagedTensorVersioned);
    field!(DLManagedTensorVersioned, version);
    field!(DLManagedTensorVersioned, manager_ctx);
    field!(DLManagedTensorVersioned, deleter);
    field!(DLManagedTensorVersioned, flags);
    field!(DLManagedTensorVersioned, dl_tensor);
    layout!(DLPackExchangeAPIHeader);
    field!(DLPackExchangeAPIHeader, version);
    field!(DLPackExchangeAPIHeader, prev_api);
    layout!(DLPackExchangeAPI);
    field!(DLPackExchangeAPI, header);
    field!(DLPackExchangeAPI, managed_tensor_allocator);
    field!(DLPackExchangeAPI, managed_tensor_from_py_object_no_sync);
    field!(DLPackExchangeAPI, managed_tensor_to_py_object_no_sync);
    field!(DLPackExchangeAPI, dltensor_from_py_object_no_sync);
    field!(DLPackExchangeAPI, current_work_stream);
    let consts: [(&str, u64); 16] = [
        ("DLPACK_MAJOR_VERSION", u64::from(DLPACK_MAJOR_VERSION)),
        (
            "DLPACK_FLAG_BITMASK_READ_ONLY",
            DLPACK_FLAG_BITMASK_READ_ONLY,
        ),
        (
            "DLPACK_FLAG_BITMASK_IS_COPIED",
            DLPACK_FLAG_BITMASK_IS_COPIED,
        ),
        ("kDLCPU", DeviceType::Cpu as u64),
        ("kDLCUDA", DeviceType::Cuda as u64),
        ("kDLCUDAHost", DeviceType::CudaHost as u64),
        ("kDLROCM", DeviceType::Rocm as u64),
        ("kDLROCMHost", DeviceType::RocmHost as u64),
        ("kDLCUDAManaged", DeviceType::CudaManaged as u64),
        ("kDLInt", DTypeCode::Int as u64),
        ("kDLUInt", DTypeCode::UInt as u64),
        ("kDLFloat", DTypeCode::Float as u64),
        ("kDLOpaqueHandle", DTypeCode::OpaqueHandle as u64),
        ("kDLBfloat", DTypeCode::BFloat as u64),
        ("kDLComplex", DTypeCode::Complex as u64),
        ("kDLBool", DTypeCode::Bool as u64),
    ];
    for (name, value) in consts {
        facts.insert(format!("const {name}"), value);
    }
    facts
}

#[test]
fn mirrors_match_the_official_header() {
    let include = header_dir();
    let c = c_facts(&include);
    let rust = rust_facts();
    assert_eq!(
        c.len(),
        rust.len(),
        "the probe and the Rust table list different facts"
    );
    let mismatches: Vec<String> = c
        .iter()
        .filter(|(key, value)| rust.get(*key) != Some(value))
        .map(|(key, value)| {
            format!(
                "{key}: dlpack.h says {value}, devmm says {:?}",
                rust.get(key)
            )
        })
        .collect();
    assert!(
        mismatches.is_empty(),
        "devmm::dlpack::ffi disagrees with {}/dlpack/dlpack.h:\n{}",
        include.display(),
        mismatches.join("\n")
    );
}

#[test]
fn devmm_stamps_a_version_the_header_can_describe() {
    // The header's minor must be at least the one devmm stamps, or its
    // consumers may not know our fields.
    let header =
        std::fs::read_to_string(header_dir().join("dlpack/dlpack.h")).expect("readable header");
    let minor: u32 = header
        .lines()
        .find_map(|l| l.strip_prefix("#define DLPACK_MINOR_VERSION "))
        .and_then(|v| v.trim().parse().ok())
        .expect("the header defines DLPACK_MINOR_VERSION");
    assert!(
        minor >= DLPACK_MINOR_VERSION,
        "dlpack.h is 1.{minor}, devmm stamps 1.{DLPACK_MINOR_VERSION}"
    );
    assert!(
        minor >= DLPACK_EXCHANGE_API_MINOR_VERSION,
        "dlpack.h is 1.{minor}, devmm's exchange API table is 1.{DLPACK_EXCHANGE_API_MINOR_VERSION}"
    );
}
