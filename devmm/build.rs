//! Generates the CUDA runtime and HIP function tables from the description
//! files in `api/` into `OUT_DIR`, where `runtime/cuda` and `runtime/rocm`
//! include them. No GPU SDK is involved.

use std::path::{Path, PathBuf};

const TABLES: [(&str, &str); 2] = [
    ("cuda_runtime.api", "cuda_runtime.rs"),
    ("hip.api", "hip.rs"),
];

/// Where devmm's generated tables find `DriverTable`, `MissingSymbol` and
/// the role struct `Calls` their `as ROLE` tags fill.
const SUPPORT: &str = "crate::runtime::gpu::calls";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let Some(out_dir) = std::env::var_os("OUT_DIR").map(PathBuf::from) else {
        fail("OUT_DIR is not set; run this build script through cargo".into());
    };
    for (description, output) in TABLES {
        let path = Path::new("api").join(description);
        println!("cargo:rerun-if-changed={}", path.display());
        let source = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| fail(format!("cannot read devmm/{}: {e}", path.display())));
        let name = format!("devmm/api/{description}");
        let code = devmm_codegen::generate_table(&name, &source, SUPPORT)
            .unwrap_or_else(|e| fail(e.to_string()));
        let target = out_dir.join(output);
        std::fs::write(&target, code)
            .unwrap_or_else(|e| fail(format!("cannot write {}: {e}", target.display())));
    }
}

/// Reports a build failure as cargo shows it, then stops the build.
fn fail(message: String) -> ! {
    eprintln!("error: {message}");
    std::process::exit(1)
}
