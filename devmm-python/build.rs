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
    let out = package_dir(&manifest)?.join("_devmm.pyi");
    // Regenerate when the stub is deleted or edited by hand, too.
    println!("cargo:rerun-if-changed={}", out.display());
    // Rewrite only on change, so an unchanged stub does not look new to
    // maturin or editors.
    if fs::read_to_string(&out).ok().as_deref() != Some(stub.as_str()) {
        fs::write(&out, stub)?;
    }
    Ok(())
}

/// The Python package's folder: `python/devmm` beside this manifest in the
/// repository, `../python/devmm` in the sdist, where maturin puts
/// `pyproject.toml` and its `python-source` at the archive's root.
fn package_dir(manifest: &Path) -> Result<PathBuf, Box<dyn Error>> {
    let candidates = [manifest.join("python"), manifest.join("../python")];
    candidates
        .iter()
        .map(|source| source.join("devmm"))
        .find(|dir| dir.is_dir())
        .ok_or_else(|| {
            format!(
                "the Python package folder (python/devmm) is neither in {} nor in {}: \
                 build from the repository or from an sdist made by maturin",
                candidates[0].display(),
                candidates[1].display()
            )
            .into()
        })
}

fn relative(base: &Path, path: &Path) -> String {
    path.strip_prefix(base)
        .unwrap_or(path)
        .display()
        .to_string()
}
