//! `devmm info` over a real HIP runtime with no AMD kernel driver behind
//! it: Debian's `libamdhip64-5` (HIP 5.2), which scripts/test.sh installs
//! with apt where it runs as root. Without a device to run, ROCm is
//! unavailable with the reason, shows no driver version, and the library's
//! `available_runtimes()` agrees (issue 29, defect 8).
//!
//! Skipped, with the reason printed, where the package is not installed or
//! an AMD GPU is present (`/dev/kfd`: then ROCm may rightly be available).

use std::process::Command;

/// The library Debian's `libamdhip64-5` package installs, by its soname.
const DEBIAN_HIP: &str = "libamdhip64.so.5";

/// Why the test cannot run here, if it cannot.
fn skip_reason() -> Option<String> {
    if std::path::Path::new("/dev/kfd").exists() {
        return Some("/dev/kfd exists: an AMD kernel driver is present, so ROCm may run".into());
    }
    // SAFETY: loading HIP runs its initializers, which only register the
    // runtime; nothing of it is called here.
    match unsafe { libloading::Library::new(DEBIAN_HIP) } {
        Ok(_) => None,
        Err(e) => Some(format!(
            "{DEBIAN_HIP} does not load ({e}): install Debian's HIP runtime as root with \
             `apt-get install -y libamdhip64-5` (scripts/test.sh does)"
        )),
    }
}

#[test]
fn debian_hip_without_a_kernel_driver_is_unavailable() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_devmm"))
        .args(["info", "--json"])
        .env_remove("DEVMM_RUNTIME")
        .env_remove("DEVMM_HIP_PATH")
        .env_remove("ROCM_PATH")
        .env_remove("HIP_PATH")
        .output()
        .expect("the devmm binary runs");
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    let rocm = report["runtimes"]
        .as_array()
        .and_then(|rts| rts.iter().find(|r| r["name"] == "rocm"))
        .expect("rocm is listed");
    assert_eq!(rocm["available"], false, "{rocm}");
    let reason = rocm["reason"].as_str().expect("a reason");
    assert!(reason.contains(DEBIAN_HIP), "names the library: {reason}");
    assert!(
        reason.contains("hipGetDeviceCount returned hipErrorNoDevice (100)"),
        "{reason}"
    );
    assert!(
        rocm.get("driver_version").is_none() && rocm.get("devices").is_none(),
        "no kernel driver answered, so no driver version and no device count: {rocm}"
    );
    assert!(
        !report["devices"]
            .as_array()
            .expect("a device list")
            .iter()
            .any(|d| d["runtime"] == "rocm"),
        "{report}"
    );

    // The library agrees: the same reason, and not among the available.
    // SAFETY: this binary has one test, and nothing else reads the
    // environment while it changes.
    unsafe {
        std::env::remove_var("DEVMM_RUNTIME");
        std::env::remove_var("DEVMM_HIP_PATH");
    }
    let Err(devmm::Error::RuntimeUnavailable { reason: same, .. }) = devmm::runtime_for("rocm")
    else {
        panic!("rocm loaded in-process with Debian's HIP and no kernel driver");
    };
    assert!(same.contains("hipErrorNoDevice (100)"), "{same}");
    let available = devmm::available_runtimes().expect("discovery runs");
    assert!(
        !available.iter().any(|rt| rt.name() == "rocm"),
        "available_runtimes() lists rocm while devmm info does not"
    );
}
