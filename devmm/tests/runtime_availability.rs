//! One rule for every runtime (issue 29, defect 8): a runtime that cannot
//! run a device here is unavailable, with the reason, and
//! `available_runtimes()` agrees with `runtime_for`. One test: the library
//! overrides are process-wide and read when a runtime first loads.

mod support;

use devmm::{Error, available_runtimes, runtime_for, runtime_names};
use support::fake_driver::{FakeControl, exclusive, fake_libraries};

#[test]
fn a_runtime_that_finds_no_device_is_unavailable_everywhere() {
    let _serial = exclusive();
    let libraries = fake_libraries();
    let hip = FakeControl::open(&libraries.hip);
    hip.reset();
    // Debian's HIP runtime without an AMD kernel driver: hipGetDeviceCount
    // answers hipErrorNoDevice (100).
    assert_eq!(hip.set_device_count(0), 0);
    let cuda = FakeControl::open(&libraries.cudart);
    cuda.reset();
    // SAFETY: this binary has one test, and it sets the variables before
    // anything in the process reads the environment on another thread.
    unsafe {
        std::env::set_var("DEVMM_HIP_PATH", &libraries.hip);
        std::env::set_var("DEVMM_CUDART_PATH", &libraries.cudart);
        std::env::remove_var("DEVMM_RUNTIME");
    }

    let names = runtime_names();
    assert!(
        names.iter().any(|n| n == "rocm"),
        "the library is present, so the probe lists it: {names:?}"
    );
    let Err(Error::RuntimeUnavailable { name, reason }) = runtime_for("rocm") else {
        panic!("rocm loaded without a device");
    };
    assert_eq!(name, "rocm");
    assert!(reason.contains("hipErrorNoDevice (100)"), "{reason}");
    assert!(
        reason.contains(&libraries.hip.to_string_lossy().into_owned()),
        "the reason names the library: {reason}"
    );

    let available: Vec<String> = available_runtimes()
        .unwrap()
        .iter()
        .map(|rt| rt.name().to_owned())
        .collect();
    assert_eq!(available, ["cpu", "cuda"], "rocm cannot run a device here");
}
