//! The build script of every fake driver library (`fake-cudart`, `fake-hip` and their reduced
//! variants): generates the library's exported C entry points from the API description devmm
//! loads (`devmm/api/*.api`, through `devmm_codegen::fake`), keeping the symbols the package's
//! features ask for. The package name picks the platform.

use std::path::PathBuf;

use devmm_codegen::api::Function;
use devmm_codegen::fake::{emit_fake, FakeTarget};
use fake_driver::entry::{ENTRY_POINTS, PROBE_ROLES, STREAM_ORDERED_ROLES};

fn main() {
    let package = std::env::var("CARGO_PKG_NAME").unwrap_or_default();
    let (description, platform) = if package.starts_with("fake-hip") {
        ("hip.api", "crate::platform::HIP")
    } else {
        ("cuda_runtime.api", "crate::platform::CUDA")
    };
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let path = manifest.join("../../devmm/api").join(description);
    println!("cargo:rerun-if-changed={}", path.display());
    println!("cargo:rerun-if-changed=../fake-driver/fake_build.rs");
    let source = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| fail(format!("cannot read {}: {e}", path.display())));
    let name = format!("devmm/api/{description}");
    let api = devmm_codegen::parse::parse(&name, &source).unwrap_or_else(|e| fail(e.to_string()));
    let feature = |f: &str| std::env::var_os(format!("CARGO_FEATURE_{f}")).is_some();
    let (runtime, ordered) = (feature("RUNTIME"), feature("STREAM_ORDERED"));
    let include = |f: &Function| {
        let role = f.role.as_deref().unwrap_or_default();
        if PROBE_ROLES.contains(&role) {
            true
        } else if STREAM_ORDERED_ROLES.contains(&role) {
            ordered
        } else {
            runtime
        }
    };
    let target = FakeTarget {
        platform,
        entry: "fake_driver::entry",
        bodies: ENTRY_POINTS,
    };
    let code = emit_fake(&api, &name, &target, include).unwrap_or_else(|e| fail(e.to_string()));
    let out =
        PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default()).join("entry_points.rs");
    std::fs::write(&out, code)
        .unwrap_or_else(|e| fail(format!("cannot write {}: {e}", out.display())));
}

/// Reports a build failure as cargo shows it, then stops the build.
fn fail(message: String) -> ! {
    eprintln!("error: {message}");
    std::process::exit(1)
}
