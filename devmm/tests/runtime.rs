//! Runtime discovery on a machine without GPUs.

use std::process::Command;
use std::sync::Arc;

use devmm::{
    DEFAULT, Device, DeviceType, Error, LEGACY_DEFAULT, PER_THREAD_DEFAULT, RuntimeRegistration,
    Stream, register_runtime, runtime_for, runtime_names,
};

#[test]
fn the_cpu_runtime_is_always_there_and_loaded_once() {
    assert!(runtime_names().iter().any(|n| n == "cpu"));
    let by_name = runtime_for("cpu").unwrap();
    assert!(Arc::ptr_eq(&by_name, &runtime_for(Device::CPU).unwrap()));
    assert!(Arc::ptr_eq(
        &by_name,
        &runtime_for(DeviceType::Cpu).unwrap()
    ));
    assert_eq!(by_name.devices().unwrap(), vec![Device::CPU]);
}

#[test]
fn the_cpu_runtime_has_one_no_op_stream() {
    let rt = runtime_for("cpu").unwrap();
    for which in [DEFAULT, LEGACY_DEFAULT, PER_THREAD_DEFAULT] {
        assert_eq!(rt.stream(Device::CPU, which).unwrap().handle(), 0);
    }
    let created = rt.create_stream(Device::CPU).unwrap();
    created.synchronize().unwrap();
    created.wait(&Stream::cpu()).unwrap();
    // Waiting on any raw handle is a no-op: nothing is ever queued on the host.
    created.wait_raw(7).unwrap();
    assert!(rt.wrap_stream(Device::CPU, 3).is_err());
    assert!(rt.stream(Device::new(DeviceType::Cpu, 1), DEFAULT).is_err());
    // Devices without streams accept `stream=None`, and -1 ("no
    // synchronization", on every device), and no stream to order on.
    assert_eq!(rt.consumer_stream(Device::CPU, None).unwrap(), None);
    assert_eq!(rt.consumer_stream(Device::CPU, Some(-1)).unwrap(), None);
    // The answer an export takes without asking (issue #16); any other
    // cpu device is refused by the call, which it therefore still makes.
    assert_eq!(rt.streamless_device(), Some(Device::CPU));
    assert!(
        rt.consumer_stream(Device::new(DeviceType::Cpu, 1), None)
            .is_err()
    );
    for value in [-2, 0, 1, 5] {
        assert!(
            rt.consumer_stream(Device::CPU, Some(value)).is_err(),
            "{value}"
        );
    }
}

#[test]
fn cpu_memcpy_copies_bytes() {
    let rt = runtime_for("cpu").unwrap();
    let mut a = [1u8, 2, 3, 4];
    let mut b = [0u8; 4];
    let s = Stream::cpu();
    let (pa, pb) = (
        devmm::DevicePtr::from_host_ptr(a.as_mut_ptr()),
        devmm::DevicePtr::from_host_ptr(b.as_mut_ptr()),
    );
    // SAFETY: both point at live 4-byte arrays that do not overlap.
    unsafe { rt.copy_device_to_device(pb, pa, 4, &s).unwrap() };
    assert_eq!(b, [1, 2, 3, 4]);
    let mut out = [0u8; 2];
    // SAFETY: `pa` is valid for 2 bytes.
    unsafe { rt.copy_device_to_host(&mut out, pa, &s).unwrap() };
    assert_eq!(out, [1, 2]);
}

#[test]
fn unknown_runtimes_are_typed_errors_naming_what_is_registered() {
    let err = runtime_for("tpu").unwrap_err();
    match &err {
        Error::RuntimeUnavailable { name, reason } => {
            assert_eq!(name, "tpu");
            assert!(reason.contains("cpu"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn third_parties_register_their_own_runtime() {
    register_runtime(RuntimeRegistration {
        name: "third-party",
        device_types: &[DeviceType::Cpu],
        probe: || true,
        load: || runtime_for("cpu"),
    })
    .unwrap();
    assert!(runtime_names().iter().any(|n| n == "third-party"));
    assert_eq!(runtime_for("third-party").unwrap().name(), "cpu");
    let again = register_runtime(RuntimeRegistration {
        name: "third-party",
        device_types: &[DeviceType::Cpu],
        probe: || false,
        load: || runtime_for("cpu"),
    });
    assert!(
        again
            .unwrap_err()
            .to_string()
            .contains("already registered")
    );
}

/// `DEVMM_RUNTIME` is read once per process, so it is tested in a child
/// process: this test binary re-runs itself with the variable set.
#[test]
fn devmm_runtime_restricts_discovery_and_picks_the_default_device() {
    if let Ok(expect) = std::env::var("DEVMM_RUNTIME_CHILD") {
        let names = runtime_names();
        match expect.as_str() {
            "cpu" => {
                assert_eq!(names, vec!["cpu".to_string()]);
                assert_eq!(devmm::default_device().unwrap(), Device::CPU);
            }
            // Forced: listed without its probe, though its library is missing;
            // available_runtimes leaves it out and runtime_for says why.
            "rocm" => {
                assert_eq!(names, vec!["cpu".to_string(), "rocm".to_string()]);
                let available = devmm::available_runtimes().unwrap();
                assert_eq!(
                    available.iter().map(|rt| rt.name()).collect::<Vec<_>>(),
                    ["cpu"]
                );
                let err = devmm::runtime_for("rocm").unwrap_err();
                assert!(
                    err.to_string().contains("/nonexistent/libamdhip64.so"),
                    "{err}"
                );
            }
            _ => {
                let err = devmm::default_device().unwrap_err();
                assert!(matches!(err, Error::RuntimeUnavailable { .. }), "{err:?}");
            }
        }
        return;
    }
    for value in ["cpu", "rocm", "nonexistent"] {
        let child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "devmm_runtime_restricts_discovery_and_picks_the_default_device",
            ])
            .env("DEVMM_HIP_PATH", "/nonexistent/libamdhip64.so")
            .env("DEVMM_RUNTIME", value)
            .env("DEVMM_RUNTIME_CHILD", value)
            .output()
            .unwrap();
        assert!(
            child.status.success(),
            "child with DEVMM_RUNTIME={value} failed:\n{}",
            String::from_utf8_lossy(&child.stdout)
        );
    }
}

#[test]
fn probes_run_outside_the_registry_lock() {
    // A probe that asks for another runtime must not deadlock discovery.
    register_runtime(RuntimeRegistration {
        name: "probe-calls-runtime-for",
        device_types: &[DeviceType::Cpu],
        probe: || runtime_for("cpu").is_ok(),
        load: || runtime_for("cpu"),
    })
    .unwrap();
    assert!(
        runtime_names()
            .iter()
            .any(|n| n == "probe-calls-runtime-for")
    );
}

#[test]
fn runtimes_must_serve_some_device_type() {
    let err = register_runtime(RuntimeRegistration {
        name: "typeless",
        device_types: &[],
        probe: || true,
        load: || runtime_for("cpu"),
    })
    .unwrap_err();
    assert!(err.to_string().contains("no device types"), "{err}");
}

/// A scan's names replace the previous scan's in one step: a reader never
/// sees the list empty or half replaced, and a registered runtime's name is
/// refused without stopping the rest.
#[test]
fn external_runtimes_are_replaced_in_one_step() {
    use devmm::runtime::set_external_runtimes;
    let (old, new) = (["scan-a", "scan-b"], ["scan-b", "cpu", "scan-c"]);
    assert!(set_external_runtimes(&old).is_empty());
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let reader = scope.spawn(|| {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let names = runtime_names();
                let has = |n: &str| names.iter().any(|m| m == n);
                // Either the old list whole or the new one whole.
                assert!(has("scan-b"), "{names:?}");
                assert!(has("scan-a") != has("scan-c"), "{names:?}");
            }
        });
        for round in 0..200 {
            let names: &[&str] = if round % 2 == 0 { &new } else { &old };
            let refused = set_external_runtimes(names);
            let refused: Vec<&str> = refused.iter().map(|(n, _)| n.as_str()).collect();
            assert_eq!(refused, if round % 2 == 0 { vec!["cpu"] } else { vec![] });
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        reader.join().unwrap();
    });
    let refused = set_external_runtimes(&new);
    assert!(matches!(refused[0].1, Error::InvalidArgument { .. }));
    assert!(runtime_names().iter().any(|n| n == "scan-c"));
    assert!(set_external_runtimes::<&str>(&[]).is_empty());
    assert!(!runtime_names().iter().any(|n| n.starts_with("scan-")));
}
