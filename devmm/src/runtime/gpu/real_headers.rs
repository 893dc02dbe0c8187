//! What devmm writes by hand about the GPU libraries, against their real
//! headers: every function of `api/cuda_runtime.api` and `api/hip.api` (its
//! return and parameter types, as the C ABI passes them), and every enum
//! value, flag, sentinel handle and struct layout the runtime passes
//! (each module's `header_facts`). A wrong one corrupts memory or asks the
//! wrong thing on hardware, and the fake drivers, written from the same
//! reading, would not notice.
//!
//! The headers come from registry packages, installed by `scripts/test.sh`'s
//! set-up: CUDA 13.1 and HIP 7.1 from the `triton` wheel (in
//! `scripts/requirements-test.txt`; PyTorch needs the same version), CUDA
//! 12.9 from `nvidia-cuda-runtime-cu12` and `nvidia-cuda-nvcc-cu12` in
//! `.venv/cuda-12`. `DEVMM_CUDA13_INCLUDE`, `DEVMM_CUDA12_INCLUDE` and
//! `DEVMM_HIP_INCLUDE` (directories, `:`-separated) name others. The C++
//! compiler is `CXX`, else `c++`: GCC's, whose messages tell an absent or
//! an overloaded function apart (clang's wording is not read).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use devmm_codegen::api::{Api, BaseType, CType};

use super::{GpuRuntime, Platform};
use crate::copy_kind::CopyKind;
use crate::managed_memory::Advice;
use crate::stream::StreamSentinel;

const SETUP: &str = "run scripts/test.sh once (its set-up installs them), or see the \
    module docs of devmm/src/runtime/gpu/real_headers.rs for the packages";

/// The table type behind a runtime alias.
trait PlatformOf {
    type Table: Platform;
}
impl<P: Platform> PlatformOf for GpuRuntime<P> {
    type Table = P;
}
type CudaTable = <crate::runtime::cuda::CudaRuntime as PlatformOf>::Table;
type HipTable = <crate::runtime::rocm::RocmRuntime as PlatformOf>::Table;

/// One real header set.
struct Header {
    /// For messages: `CUDA 13.1`.
    name: &'static str,
    /// `cuda` or `hip`: the names' prefix.
    prefix: &'static str,
    /// The description file its library is called through.
    api: &'static str,
    includes: Vec<PathBuf>,
    /// The preamble: defines and the `#include`.
    preamble: &'static str,
    /// The device properties struct.
    device_prop: &'static str,
}

fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("devmm is a workspace member")
}

/// The Python environment's site-packages that holds triton: `PYTHON`,
/// then the workspace's `.venv`, then `python3`.
fn site_packages() -> PathBuf {
    let venv = workspace().join(".venv/bin/python");
    let candidates = std::env::var_os("PYTHON")
        .map(PathBuf::from)
        .into_iter()
        .chain([venv, PathBuf::from("python3")]);
    for python in candidates {
        let Ok(out) = Command::new(&python)
            .args([
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ])
            .output()
        else {
            continue;
        };
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if out.status.success() && dir.join("triton/backends").is_dir() {
            return dir;
        }
    }
    panic!("no Python environment with the triton wheel (the CUDA 13 and HIP headers); {SETUP}")
}

/// `var`'s directories, else `default`'s; each must exist.
fn includes(var: &str, default: impl FnOnce() -> Vec<PathBuf>) -> Vec<PathBuf> {
    let dirs = match std::env::var_os(var) {
        Some(value) => std::env::split_paths(&value).collect(),
        None => default(),
    };
    for dir in &dirs {
        assert!(
            dir.is_dir(),
            "{} is not a directory ({var}); {SETUP}",
            dir.display()
        );
    }
    dirs
}

/// The CUDA header as the runtime's own build reads it: the declarations of
/// the exported symbols, which devmm looks up by name. Code compiled against
/// the header otherwise gets renames (`cudaGetDeviceProperties` is
/// `cudaGetDeviceProperties_v2` in CUDA 12, `cudaStreamGetCaptureInfo` its
/// `_v2`), whose shapes can differ from the symbol of the plain name.
const CUDA_PREAMBLE: &str =
    "#define __CUDA_API_VERSION_INTERNAL 1\n#include <cuda_runtime_api.h>\n";

/// A CUDA release's headers, in `includes`.
fn cuda(name: &'static str, includes: Vec<PathBuf>) -> Header {
    Header {
        name,
        prefix: "cuda",
        api: "cuda_runtime.api",
        includes,
        preamble: CUDA_PREAMBLE,
        device_prop: "cudaDeviceProp",
    }
}

fn cuda13() -> Header {
    cuda(
        "CUDA 13",
        includes("DEVMM_CUDA13_INCLUDE", || {
            vec![site_packages().join("triton/backends/nvidia/include")]
        }),
    )
}

fn cuda12() -> Header {
    let root = workspace().join(".venv/cuda-12/nvidia");
    cuda(
        "CUDA 12",
        includes("DEVMM_CUDA12_INCLUDE", || {
            vec![
                root.join("cuda_runtime/include"),
                root.join("cuda_nvcc/include"),
            ]
        }),
    )
}

fn hip7() -> Header {
    Header {
        name: "HIP 7",
        prefix: "hip",
        api: "hip.api",
        includes: includes("DEVMM_HIP_INCLUDE", || {
            vec![site_packages().join("triton/backends/amd/include")]
        }),
        // Without its C++ overloads (`hipMalloc` of a `T**`): the C
        // functions are what devmm calls.
        preamble: "#define __HIP_PLATFORM_AMD__ 1\n#define __HIP_DISABLE_CPP_FUNCTIONS__ 1\n\
                   #include <hip/hip_runtime_api.h>\n",
        device_prop: "hipDeviceProp_t",
    }
}

/// Compiles `body` after the header's preamble and runs it; `Err` holds the
/// compiler's messages.
fn run(header: &Header, body: &str) -> Result<String, String> {
    // One directory per probe: the tests run in parallel.
    static PROBES: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "devmm-real-headers-{}-{}",
        std::process::id(),
        PROBES.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let source = dir.join("probe.cpp");
    let binary = dir.join("probe");
    std::fs::write(&source, format!("{}{PROBE_SUPPORT}{body}", header.preamble)).unwrap();
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let mut command = Command::new(&cxx);
    // Plain quotes in the messages, which `signatures` reads.
    command.env("LC_ALL", "C");
    command
        .args(["-std=c++17", "-w", "-o"])
        .arg(&binary)
        .arg(&source);
    for dir in &header.includes {
        command.arg("-I").arg(dir);
    }
    let compiled = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C++ compiler {cxx:?}: {e}; install g++"));
    if !compiled.status.success() {
        return Err(String::from_utf8_lossy(&compiled.stderr).into_owned());
    }
    let ran = Command::new(&binary).output().expect("run the probe");
    assert!(
        ran.status.success(),
        "the {} probe failed: {ran:?}",
        header.name
    );
    std::fs::remove_dir_all(&dir).ok();
    Ok(String::from_utf8(ran.stdout).unwrap())
}

/// How the C ABI passes a type, printed by the probe: `ptr`, `i32` / `u64`
/// (integers), `e32` (an enum: its values, not its signedness, are what
/// devmm relies on), `f64`, `struct64`, `void`.
const PROBE_SUPPORT: &str = r#"
#include <cstdio>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

template <class T> std::string abi() {
    if (std::is_void<T>::value) return "void";
    if (std::is_pointer<T>::value) return "ptr";
    std::string bits = std::to_string(sizeof(T) * 8);
    if (std::is_enum<T>::value) return "e" + bits;
    if (std::is_integral<T>::value) return (std::is_signed<T>::value ? "i" : "u") + bits;
    if (std::is_floating_point<T>::value) return "f" + bits;
    if (std::is_class<T>::value) return "struct" + std::to_string(sizeof(T));
    return "unknown";
}
template <class F> struct sig;
template <class R, class... A> struct sig<R(A...)> {
    static std::string text() {
        std::string s = abi<R>() + "(";
        int n = 0;
        ((s += (n++ ? "," : "") + abi<A>()), ...);
        return s + ")";
    }
};
template <class R, class... A> struct sig<R(A...) noexcept> : sig<R(A...)> {};
template <unsigned N> struct opaque { unsigned char bytes[N]; };
template <class Real, class Ours> void compare(const char* name) {
    printf("sig %s %s %s\n", name, sig<Real>::text().c_str(), sig<Ours>::text().c_str());
}
"#;

/// `ty` as C++ in the `ours` namespace, where the description's aliases
/// are declared (`struct N` is `opaque<N>`).
fn cpp(ty: &CType) -> String {
    let base = match &ty.base {
        BaseType::Opaque(bytes) => format!("opaque<{bytes}>"),
        other => other.to_string(),
    };
    let constness = if ty.is_const { "const " } else { "" };
    format!("{constness}{base}{}", "*".repeat(ty.pointers))
}

fn description(file: &str) -> Api {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("api").join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    devmm_codegen::parse::parse(file, &text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Each function's real and declared ABI, `None` where the header does not
/// declare it. `extra` adds signatures of devmm's own (name, C++ function
/// type in `ours`) for functions it also calls in another shape.
///
/// A C function that C++ also overloads (HIP's `hipMallocAsync` of a `T**`)
/// has no single `decltype`: for it the declared shape, in the header's own
/// types, must name one of the overloads exactly.
fn signatures(
    header: &Header,
    api: &Api,
    extra: &[(&str, &str)],
) -> BTreeMap<String, Option<(String, String)>> {
    let mut ours = String::from("namespace ours {\n");
    for alias in &api.types {
        ours += &format!("using {} = {};\n", alias.name, cpp(&alias.ty));
    }
    // (key, function name, its type in `ours`, its shape in the header's types)
    let mut entries: Vec<(String, String, String, Option<String>)> = Vec::new();
    for (i, f) in api.functions.iter().enumerate() {
        let params: Vec<String> = f.params.iter().map(|p| cpp(&p.ty)).collect();
        let shape = format!("{}({})", cpp(&f.ret), params.join(", "));
        ours += &format!("using f{i} = {shape};\n");
        entries.push((
            f.name.clone(),
            f.name.clone(),
            format!("ours::f{i}"),
            Some(shape),
        ));
    }
    for (i, (name, shape)) in extra.iter().enumerate() {
        ours += &format!("using extra{i} = {shape};\n");
        entries.push((
            format!("{name}@extra{i}"),
            name.to_string(),
            format!("ours::extra{i}"),
            None,
        ));
    }
    ours += "}\n";
    // The body starts after the preamble and the support code.
    let offset = header.preamble.matches('\n').count() + PROBE_SUPPORT.matches('\n').count();
    let (mut absent, mut overloaded) = (BTreeSet::new(), BTreeSet::new());
    for _ in 0..3 {
        let checked_exactly = overloaded.clone();
        let mut body = ours.clone() + "int main() {\n";
        let mut lines = BTreeMap::new();
        for (key, name, ty, shape) in &entries {
            if absent.contains(name) {
                continue;
            }
            let real = match shape {
                Some(shape) if overloaded.contains(name) => {
                    format!(
                        "std::remove_pointer_t<decltype(static_cast<std::add_pointer_t<{shape}>>(&::{name}))>"
                    )
                }
                _ => format!("decltype(::{name})"),
            };
            lines.insert(offset + body.matches('\n').count() + 1, name.clone());
            body += &format!("    compare<{real}, {ty}>(\"{key}\");\n");
        }
        body += "    return 0;\n}\n";
        let messages = match run(header, &body) {
            Ok(out) => {
                let mut found: BTreeMap<String, Option<(String, String)>> = out
                    .lines()
                    .filter_map(|line| {
                        let mut words = line.strip_prefix("sig ")?.split(' ');
                        let (key, real, declared) = (words.next()?, words.next()?, words.next()?);
                        Some((
                            key.to_string(),
                            Some((real.to_string(), declared.to_string())),
                        ))
                    })
                    .collect();
                found.extend(absent.into_iter().map(|name| (name, None)));
                return found;
            }
            Err(messages) => messages,
        };
        // `probe.cpp:LINE:COLUMN: error: TEXT`: which function, and why.
        for error in messages.lines().filter(|l| l.contains(": error: ")) {
            let line: Option<usize> = error
                .split_once("probe.cpp:")
                .and_then(|(_, rest)| rest.split(':').next()?.parse().ok());
            let name = line.and_then(|line| lines.get(&line));
            match name {
                Some(name) if error.contains("has not been declared") => {
                    absent.insert(name.clone());
                }
                Some(name) if error.contains("overloaded function") => {
                    overloaded.insert(name.clone());
                }
                Some(name) if checked_exactly.contains(name) => panic!(
                    "{}: no overload of {name} has the type devmm declares:\n{messages}",
                    header.name
                ),
                _ => {}
            }
        }
    }
    panic!(
        "the {} signature probe does not compile; {SETUP}",
        header.name
    )
}

/// A printed ABI's words (the return type first), with an integer and an
/// enum of one width the same word.
fn words(abi: &str) -> Vec<String> {
    abi.split(['(', ',', ')'])
        .filter(|w| !w.is_empty())
        .map(|w| match w.strip_prefix(['i', 'u', 'e']) {
            Some(bits) if bits.parse::<u32>().is_ok() => format!("int{bits}"),
            _ => w.to_string(),
        })
        .collect()
}

/// Whether a real and a declared ABI agree: the same words, where an enum
/// matches an integer of its width.
fn agree(real: &str, declared: &str) -> bool {
    words(real) == words(declared)
}

/// Whether the declared ABI is the real one with parameters added at the
/// end, which a C callee never reads (the caller passes and pops them).
fn extends(real: &str, declared: &str) -> bool {
    let (real, declared) = (words(real), words(declared));
    declared.len() > real.len() && declared.starts_with(&real)
}

/// What one header is expected to differ in from the descriptions.
#[derive(Default)]
struct Expected<'a> {
    /// Functions the header lacks.
    absent: &'a [&'a str],
    /// Functions whose shape there differs, checked through `extra`.
    reshaped: &'a [&'a str],
    /// devmm's own shapes for those: (name, C++ function type in `ours`).
    extra: &'a [(&'a str, &'a str)],
    /// Functions devmm declares with trailing parameters this header's
    /// symbol does not take (a later release's shape).
    extended: &'a [&'a str],
}

/// Checks every function of the header's description against `expected`.
fn check_signatures(header: &Header, expected: &Expected<'_>) {
    let Expected {
        absent,
        reshaped,
        extra,
        extended,
    } = *expected;
    let api = description(header.api);
    let found = signatures(header, &api, extra);
    let mut problems = Vec::new();
    let keys = api.functions.iter().map(|f| f.name.clone());
    let extras = extra
        .iter()
        .enumerate()
        .map(|(i, (name, _))| format!("{name}@extra{i}"));
    for key in keys.chain(extras) {
        if !found.contains_key(&key) && !absent.contains(&key.as_str()) {
            problems.push(format!("{key}: the probe did not report it"));
        }
    }
    for (key, seen) in &found {
        let name = key.split('@').next().unwrap();
        match seen {
            None if absent.contains(&name) => {}
            None => problems.push(format!("{name}: not declared by the header")),
            Some((real, declared)) if reshaped.contains(&key.as_str()) => {
                if agree(real, declared) {
                    problems.push(format!(
                        "{name}: expected a new shape, the header has {real}"
                    ));
                }
            }
            Some((real, declared)) if extended.contains(&key.as_str()) => {
                if !extends(real, declared) {
                    problems.push(format!(
                        "{key}: expected {declared} to extend the header's {real}"
                    ));
                }
            }
            Some((real, declared)) => {
                if !agree(real, declared) {
                    problems.push(format!(
                        "{key}: the header has {real}, devmm declares {declared}"
                    ));
                }
            }
        }
    }
    for name in absent {
        if !matches!(found.get(*name), Some(None)) {
            problems.push(format!(
                "{name}: expected absent, but the header declares it"
            ));
        }
    }
    assert!(problems.is_empty(), "{}: {problems:#?}", header.name);
}

/// Checks each fact (a C++ expression with `{P}` for the prefix, and the
/// value devmm uses) against the header.
fn check_facts(header: &Header, facts: &[(String, i128)]) {
    let words = super::result::device::PROPERTIES_WORDS;
    let mut body = format!("#define PROBE_PROPERTIES_WORDS {words}ULL\n");
    body += &format!("typedef {} DeviceProp_PROBE;\n", header.device_prop);
    body += "int main() {\n";
    for (i, (expr, _)) in facts.iter().enumerate() {
        let expr = expr.replace("{P}", header.prefix);
        body += &format!("    printf(\"{i} %lld\\n\", (long long)({expr}));\n");
    }
    body += "    return 0;\n}\n";
    let out = run(header, &body)
        .unwrap_or_else(|e| panic!("the {} facts probe: {e}\n{body}", header.name));
    let seen: Vec<i128> = out
        .lines()
        .map(|l| l.split_once(' ').unwrap().1.parse().unwrap())
        .collect();
    assert_eq!(
        seen.len(),
        facts.len(),
        "{}: the probe printed {out}",
        header.name
    );
    let wrong: Vec<String> = facts
        .iter()
        .zip(&seen)
        .filter(|((_, ours), real)| ours != *real)
        .map(|((expr, ours), real)| {
            format!(
                "{}: the header has {real}, devmm uses {ours}",
                expr.replace("{P}", header.prefix)
            )
        })
        .collect();
    assert!(wrong.is_empty(), "{}: {wrong:#?}", header.name);
}

/// The facts every GPU platform shares, then `P`'s own: its device
/// attributes (named from `device_attribute`) and the status codes named
/// `errors` (out of memory, no device, insufficient driver, not
/// initialised).
fn platform_facts<P: Platform>(device_attribute: &str, errors: [&str; 4]) -> Vec<(String, i128)> {
    let mut facts: Vec<(String, i128)> = Vec::new();
    let codes = [
        P::ERROR_OUT_OF_MEMORY,
        P::ERROR_NO_DEVICE,
        P::ERROR_INSUFFICIENT_DRIVER,
        P::ERROR_NOT_INITIALIZED,
    ];
    for (name, code) in errors.into_iter().zip(codes) {
        facts.push((name.into(), code.into()));
    }
    let modules = [
        super::result::device::header_facts(),
        super::result::stream::header_facts(),
        super::result::memory::header_facts(),
        super::result::pool::header_facts(),
        super::ipc::header_facts(),
        super::managed::header_facts(),
    ];
    facts.extend(modules.into_iter().flat_map(owned));
    let names = [
        ("HostToHost", CopyKind::HostToHost),
        ("HostToDevice", CopyKind::HostToDevice),
        ("DeviceToHost", CopyKind::DeviceToHost),
        ("DeviceToDevice", CopyKind::DeviceToDevice),
        ("Default", CopyKind::Default),
    ];
    for (name, kind) in names {
        facts.push((format!("{{P}}Memcpy{name}"), kind as i128));
    }
    for advice in Advice::ALL {
        let name = format!("{advice:?}");
        facts.push((format!("{{P}}MemAdvise{name}"), advice.code().into()));
    }
    let attribute = |name: &str, value: i32| (format!("{device_attribute}{name}"), value.into());
    facts.push(attribute(
        "MemoryPoolsSupported",
        P::ATTR_MEMORY_POOLS_SUPPORTED,
    ));
    facts.push(attribute(
        "ConcurrentManagedAccess",
        P::ATTR_CONCURRENT_MANAGED_ACCESS,
    ));
    facts.push(attribute("UnifiedAddressing", P::ATTR_UNIFIED_ADDRESSING));
    if let Some((major, minor)) = P::ATTR_COMPUTE_CAPABILITY {
        facts.push(attribute("ComputeCapabilityMajor", major));
        facts.push(attribute("ComputeCapabilityMinor", minor));
    }
    if let Some(numa_id) = P::ATTR_HOST_NUMA_ID {
        facts.push(attribute("HostNumaId", numa_id));
    }
    facts.push((
        "(uintptr_t){P}StreamPerThread".into(),
        sentinel::<P>(StreamSentinel::PerThreadDefault),
    ));
    facts
}

fn sentinel<P: Platform>(which: StreamSentinel) -> i128 {
    P::sentinel_handle(which) as i128
}

/// A module's facts as the owned expressions the platforms' lists hold.
fn owned(facts: Vec<(&'static str, i128)>) -> impl Iterator<Item = (String, i128)> {
    facts
        .into_iter()
        .map(|(expr, value)| (expr.to_owned(), value))
}

fn cuda_facts(version: i32) -> Vec<(String, i128)> {
    type P = CudaTable;
    let errors = [
        "cudaErrorMemoryAllocation",
        "cudaErrorNoDevice",
        "cudaErrorInsufficientDriver",
        "cudaErrorInitializationError",
    ];
    let mut facts = platform_facts::<P>("cudaDevAttr", errors);
    facts.push((
        "(uintptr_t)cudaStreamLegacy".into(),
        sentinel::<P>(StreamSentinel::LegacyDefault),
    ));
    // Pools on the host NUMA nodes from 12.2, on the host as a whole from 13.
    let (_, host_since) = P::HOST_POOLS_SINCE.expect("CUDA has host pools");
    let (numa, host) = P::ATTR_HOST_POOLS_SUPPORTED.expect("CUDA has host pools");
    facts.push((
        "cudaDevAttrHostNumaMemoryPoolsSupported".into(),
        numa.into(),
    ));
    if version >= host_since {
        facts.push(("cudaDevAttrHostMemoryPoolsSupported".into(), host.into()));
    }
    // The header's own version says which shape it has (CUDART_VERSION is
    // what `cudaRuntimeGetVersion` reports for it).
    facts.push(("CUDART_VERSION / 1000".into(), (version / 1000).into()));
    facts.extend(owned(super::result::pool::host_location_facts()));
    if version >= P::MEM_LOCATION_SINCE.expect("CUDA 13 takes locations") {
        facts.extend(owned(super::managed::location_facts()));
    }
    facts
}

fn hip_facts() -> Vec<(String, i128)> {
    type P = HipTable;
    let errors = [
        "hipErrorOutOfMemory",
        "hipErrorNoDevice",
        "hipErrorInsufficientDriver",
        "hipErrorNotInitialized",
    ];
    let mut facts = platform_facts::<P>("hipDeviceAttribute", errors);
    // A HIP this new has `maxSize` (MAX_POOL_SIZE_SINCE encodes HIP_VERSION).
    facts.push((
        format!(
            "HIP_VERSION >= {}",
            P::MAX_POOL_SIZE_SINCE.expect("HIP 6.2 has maxSize")
        ),
        1,
    ));
    facts
}

/// CUDA 13's prefetch and advice, in the shape `managed.rs` calls them
/// (`PrefetchLocation`, `AdviseLocation`): a `cudaMemLocation` by value.
const CUDA13_MANAGED: [(&str, &str); 2] = [
    (
        "cudaMemPrefetchAsync",
        "cudaError_t(const void*, size_t, opaque<8>, unsigned int, cudaStream_t)",
    ),
    (
        "cudaMemAdvise",
        "cudaError_t(const void*, size_t, cudaMemoryAdvise, opaque<8>)",
    ),
];

#[test]
fn cuda_13_signatures() {
    check_signatures(
        &cuda13(),
        &Expected {
            // CUDA 13 has only the unversioned name (for its new struct);
            // devmm falls back to it (`result::device::name`).
            absent: &["cudaGetDeviceProperties_v2"],
            reshaped: &["cudaMemPrefetchAsync", "cudaMemAdvise"],
            extra: &CUDA13_MANAGED,
            ..Expected::default()
        },
    );
}

#[test]
fn cuda_12_signatures() {
    check_signatures(
        &cuda12(),
        &Expected {
            extended: &["cudaStreamGetCaptureInfo"],
            ..Expected::default()
        },
    );
}

#[test]
fn hip_7_signatures() {
    check_signatures(
        &hip7(),
        &Expected {
            extended: &["hipStreamGetCaptureInfo"],
            ..Expected::default()
        },
    );
}

#[test]
fn cuda_13_facts() {
    check_facts(&cuda13(), &cuda_facts(13_000));
}

#[test]
fn cuda_12_facts() {
    check_facts(&cuda12(), &cuda_facts(12_000));
}

#[test]
fn hip_7_facts() {
    check_facts(&hip7(), &hip_facts());
}

/// The real CUDA runtime libraries (the same wheels) export every function
/// the description requires, and every optional one but `missing`. Their
/// dynamic symbols are read with binutils' `nm`, which the C++ compiler
/// comes with: loading the library into this process would run its
/// initializers under valgrind, which runs these tests too.
fn check_library(library: &Path, missing: &[&str]) {
    assert!(
        library.is_file(),
        "{} is not there; {SETUP}",
        library.display()
    );
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(library)
        .output()
        .unwrap_or_else(|e| panic!("cannot run nm: {e}; install binutils"));
    assert!(out.status.success(), "nm {}: {out:?}", library.display());
    let symbols: BTreeSet<&str> = std::str::from_utf8(&out.stdout)
        .unwrap()
        .lines()
        .filter_map(|line| line.split_whitespace().nth(2))
        .map(|symbol| symbol.split('@').next().unwrap())
        .collect();
    let api = description("cuda_runtime.api");
    let mut problems = Vec::new();
    for f in &api.functions {
        let found = symbols.contains(f.name.as_str());
        let expected = !missing.contains(&f.name.as_str());
        if found != expected {
            problems.push(format!("{}: exported {found}, expected {expected}", f.name));
        }
    }
    assert!(problems.is_empty(), "{}: {problems:#?}", library.display());
}

#[test]
fn cuda_13_library() {
    let lib = site_packages().join("nvidia/cu13/lib/libcudart.so.13");
    check_library(&lib, &["cudaGetDeviceProperties_v2"]);
}

#[test]
fn cuda_12_library() {
    let lib = workspace().join(".venv/cuda-12/nvidia/cuda_runtime/lib/libcudart.so.12");
    check_library(&lib, &[]);
}
