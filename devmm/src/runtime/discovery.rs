//! Where a driver library is looked for, in order: a copy the process has
//! already loaded (PyTorch's libcudart, say: a second copy would be a
//! second runtime with its own state), then the library names through the
//! dynamic loader's search path, then the platform's install directories
//! (`$CUDA_PATH/lib64`, `/opt/rocm/lib`, ...), then the directories pip's
//! CUDA wheels install into (`site-packages/nvidia/cu13/lib`, ...).
//!
//! This module only lists candidates; `driver.rs` opens them.

use std::ffi::{CStr, OsString, c_int, c_void};
use std::path::{Path, PathBuf};

/// A platform's install locations.
#[derive(Clone, Copy, Debug)]
pub struct SearchPath<'a> {
    /// Environment variables naming an install root (`CUDA_PATH`).
    pub(crate) root_envs: &'a [&'a str],
    /// Roots tried as well (`/usr/local/cuda`).
    pub(crate) default_roots: &'a [&'a str],
    /// Library directories under a root (`lib64`).
    pub(crate) lib_dirs: &'a [&'a str],
    /// Library directories under a Python `site-packages` (pip wheels).
    pub(crate) wheel_dirs: &'a [&'a str],
}

/// A library file the process has already loaded whose name starts with
/// one of `names`' unversioned stem (`libcudart.so` for `libcudart.so.13`).
pub(crate) fn loaded(names: &[&str]) -> Option<PathBuf> {
    let stems: Vec<&str> = names.iter().map(|n| stem(n)).collect();
    loaded_objects().into_iter().find(|path| {
        path.file_name()
            .and_then(|f| f.to_str())
            .is_some_and(|file| stems.iter().any(|stem| file.starts_with(stem)))
    })
}

/// `libcudart.so.13` → `libcudart.so`.
fn stem(name: &str) -> &str {
    match name.find(".so") {
        Some(i) => &name[..i + 3],
        None => name,
    }
}

/// Every file `names` may be under in the platform's directories, in the
/// order they are tried.
pub(crate) fn candidates(names: &[&str], search: &SearchPath<'_>) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = search
        .root_envs
        .iter()
        .filter_map(std::env::var_os)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .collect();
    roots.extend(search.default_roots.iter().map(PathBuf::from));
    let mut dirs: Vec<PathBuf> = roots
        .iter()
        .flat_map(|root| search.lib_dirs.iter().map(move |d| root.join(d)))
        .collect();
    for site in site_packages() {
        dirs.extend(search.wheel_dirs.iter().map(|d| site.join(d)));
    }
    dirs.iter()
        .flat_map(|dir| names.iter().map(move |name| dir.join(name)))
        .filter(|path| path.is_file())
        .collect()
}

/// Python package directories a pip-installed CUDA wheel may be in: the
/// active virtual or conda environment's, the user's, then the system's.
fn site_packages() -> Vec<PathBuf> {
    let mut prefixes: Vec<PathBuf> = ["VIRTUAL_ENV", "CONDA_PREFIX"]
        .iter()
        .filter_map(std::env::var_os)
        .map(PathBuf::from)
        .collect();
    if let Some(home) = std::env::var_os("HOME") {
        prefixes.push(Path::new(&home).join(".local"));
    }
    prefixes.extend(["/usr/local", "/usr"].map(PathBuf::from));
    let mut sites = Vec::new();
    for prefix in prefixes {
        let Ok(entries) = std::fs::read_dir(prefix.join("lib")) else {
            continue;
        };
        let mut pythons: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
            .map(|e| e.path())
            .collect();
        pythons.sort();
        for python in pythons.into_iter().rev() {
            sites.push(python.join("site-packages"));
            sites.push(python.join("dist-packages"));
        }
    }
    sites
}

/// The paths of every shared object mapped into the process.
fn loaded_objects() -> Vec<PathBuf> {
    unsafe extern "C" fn collect(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: `data` is the `Vec` passed below, borrowed for the call;
        // `info` is valid for the callback (dl_iterate_phdr's contract) and
        // its name is null or a NUL-terminated string.
        unsafe {
            let paths = &mut *data.cast::<Vec<PathBuf>>();
            let name = (*info).dlpi_name;
            if !name.is_null() {
                let name = CStr::from_ptr(name);
                if !name.is_empty() {
                    use std::os::unix::ffi::OsStringExt;
                    paths.push(PathBuf::from(OsString::from_vec(name.to_bytes().to_vec())));
                }
            }
        }
        0
    }
    let mut paths: Vec<PathBuf> = Vec::new();
    // SAFETY: the callback only appends to `paths`, which outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(collect), std::ptr::from_mut(&mut paths).cast()) };
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(
        miri,
        ignore = "lists the loaded libraries through dl_iterate_phdr, a foreign function miri cannot run"
    )]
    fn a_library_the_process_loaded_is_found_by_its_stem() {
        // Every Rust test binary on Linux links libc dynamically.
        let found = loaded(&["libc.so.6"]).expect("libc is loaded");
        assert!(
            found
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("libc.so")
        );
        assert_eq!(loaded(&["libdevmm_absent.so.1"]), None);
        assert_eq!(stem("libcudart.so.13"), "libcudart.so");
        assert_eq!(stem("libamdhip64.so"), "libamdhip64.so");
    }

    #[test]
    #[cfg_attr(miri, ignore = "makes directories, which miri's isolation refuses")]
    fn install_roots_and_wheel_directories_are_searched_in_order() {
        let root = std::env::temp_dir().join(format!("devmm-discovery-{}", std::process::id()));
        let lib = root.join("lib64");
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::write(lib.join("libfake.so.13"), b"").unwrap();
        std::fs::write(lib.join("libfake.so"), b"").unwrap();
        let root_text = root.to_string_lossy();
        let search = SearchPath {
            root_envs: &[],
            default_roots: &[&root_text],
            lib_dirs: &["lib", "lib64"],
            wheel_dirs: &[],
        };
        let found = candidates(&["libfake.so.13", "libfake.so.12", "libfake.so"], &search);
        assert_eq!(found, [lib.join("libfake.so.13"), lib.join("libfake.so")]);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
