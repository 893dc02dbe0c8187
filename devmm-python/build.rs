//! Generates `python/devmm/_devmm.pyi` from this crate's own Rust source
//! (through devmm-codegen), so the shipped stubs always match the module.

use std::error::Error;
use std::fs;
use std::path::{Path, PathBuf};

fn main() -> Result<(), Box<dyn Error>> {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let src = manifest.join("src");
    println!("cargo:rerun-if-changed={}", src.display());
    let mut files: Vec<PathBuf> = fs::read_dir(&src)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    files.retain(|p| p.extension().is_some_and(|e| e == "rs"));
    files.sort();
    // The IntEnums are the core's own enums (`Python enum:` on their doc).
    let core_enums = manifest.join("../devmm/src/device.rs");
    println!("cargo:rerun-if-changed={}", core_enums.display());
    files.insert(0, core_enums);
    let texts: Vec<(String, String)> = files
        .iter()
        .map(|p| Ok((relative(&manifest, p), fs::read_to_string(p)?)))
        .collect::<Result<_, std::io::Error>>()?;
    let sources: Vec<(&str, &str)> = texts
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_str()))
        .collect();
    let stub = devmm_codegen::stubs::generate(&sources, "devmm._devmm")?;
    let out = manifest.join("python").join("devmm").join("_devmm.pyi");
    // Regenerate when the stub is deleted or edited by hand, too.
    println!("cargo:rerun-if-changed={}", out.display());
    // Rewrite only on change, so an unchanged stub does not look new to
    // maturin or editors.
    if fs::read_to_string(&out).ok().as_deref() != Some(stub.as_str()) {
        fs::write(&out, stub)?;
    }
    Ok(())
}

fn relative(base: &Path, path: &Path) -> String {
    path.strip_prefix(base)
        .unwrap_or(path)
        .display()
        .to_string()
}
