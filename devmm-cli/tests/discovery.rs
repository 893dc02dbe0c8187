//! Discovery past a library that loads but cannot run (issue 29, defect 7):
//! a `libcudart.so.13` over a driver too old for it (error 35) must not
//! hide a `libcudart.so.12` that runs, and `devmm info` reports every
//! library tried with its outcome.

// Formatted with devmm (edition 2024), not as part of this crate.
#[rustfmt::skip]
#[path = "../../devmm/tests/support/fake_driver.rs"]
mod fake_driver;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A `$CUDA_HOME` whose `lib64` holds two copies of the fake CUDA runtime
/// under the names discovery tries, removed on drop. Copies, not links:
/// each file is its own library with its own state, and the fake reads its
/// own file name to play the one `FAKE_DRIVER_NO_DRIVER` names.
struct CudaHome(PathBuf);

impl CudaHome {
    fn new(tag: &str) -> CudaHome {
        let home =
            std::env::temp_dir().join(format!("devmm-discovery-{tag}-{}", std::process::id()));
        let lib = home.join("lib64");
        std::fs::create_dir_all(&lib).unwrap();
        for name in ["libcudart.so.13", "libcudart.so.12"] {
            std::fs::copy(&fake_driver::fake_libraries().cudart, lib.join(name)).unwrap();
        }
        CudaHome(home)
    }

    fn lib(&self, name: &str) -> String {
        self.0
            .join("lib64")
            .join(name)
            .to_string_lossy()
            .into_owned()
    }

    fn info(&self, no_driver: &str) -> serde_json::Value {
        let out = Command::new(env!("CARGO_BIN_EXE_devmm"))
            .args(["info", "--json"])
            .env_remove("DEVMM_RUNTIME")
            .env_remove("DEVMM_CUDART_PATH")
            .env("DEVMM_HIP_PATH", "/nonexistent/libamdhip64.so")
            .env("CUDA_HOME", &self.0)
            .env("CUDA_PATH", &self.0)
            .env("FAKE_DRIVER_NO_DRIVER", no_driver)
            .output()
            .expect("the devmm binary runs");
        assert!(out.status.success(), "stderr: {}", stderr(&out));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
        report["runtimes"]
            .as_array()
            .and_then(|rts| rts.iter().find(|r| r["name"] == "cuda"))
            .expect("cuda is listed")
            .clone()
    }
}

impl Drop for CudaHome {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn exists(path: &str) -> bool {
    Path::new(path).is_file()
}

#[test]
fn a_library_that_loads_but_cannot_run_does_not_hide_the_next() {
    let home = CudaHome::new("fallback");
    let (newer, older) = (home.lib("libcudart.so.13"), home.lib("libcudart.so.12"));
    assert!(exists(&newer) && exists(&older));
    let cuda = home.info("libcudart.so.13");
    assert_eq!(cuda["available"], true, "{cuda}");
    assert_eq!(cuda["library"], older.as_str(), "{cuda}");
    let tried: Vec<&str> = cuda["discovery"]
        .as_array()
        .unwrap_or_else(|| panic!("no discovery list: {cuda}"))
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    let passed_over = tried
        .iter()
        .find(|a| a.starts_with(&format!("{newer} (")))
        .unwrap_or_else(|| panic!("the CUDA 13 library is not reported: {tried:?}"));
    assert!(
        passed_over.contains("cudaErrorInsufficientDriver (35)"),
        "{passed_over}"
    );
    assert_eq!(
        tried.last().copied(),
        Some(format!("{older} (used)").as_str()),
        "{tried:?}"
    );
}

#[test]
fn when_no_library_can_run_every_attempt_is_in_the_reason() {
    let home = CudaHome::new("none");
    let cuda = home.info("1");
    assert_eq!(cuda["available"], false, "{cuda}");
    let reason = cuda["reason"].as_str().expect("a reason");
    for name in ["libcudart.so.13", "libcudart.so.12"] {
        let attempt = format!("{} (loads, but there is no usable driver", home.lib(name));
        assert!(reason.contains(&attempt), "{name} missing: {reason}");
    }
    assert!(
        reason.contains("cudaErrorInsufficientDriver (35)"),
        "{reason}"
    );
}
