//! The `devmm` binary as a user runs it: real output, real exit statuses.

// Builds and locates the fake driver libraries, as devmm's own tests do.
// Formatted with devmm (edition 2024), not as part of this crate.
#[rustfmt::skip]
#[path = "../../devmm/tests/support/fake_driver.rs"]
mod fake_driver;

use std::process::{Command, Output};

mod support;

use support::{bench_args, devmm};

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("stdout is UTF-8")
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).expect("stderr is UTF-8")
}

const CPU_CHAIN: &str = "MallocMemoryResource(device=cpu:0, alignment=64)";

#[test]
fn info_lists_the_cpu_runtime_device_and_chain() {
    let out = devmm(&["info"]);
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    let text = stdout(&out);
    let runtime = text
        .lines()
        .find(|l| l.starts_with("cpu "))
        .unwrap_or_else(|| panic!("no cpu runtime line in:\n{text}"));
    assert!(runtime.contains("available"), "{runtime}");
    let device = text
        .lines()
        .find(|l| l.starts_with("cpu:0 "))
        .unwrap_or_else(|| panic!("no cpu:0 device line in:\n{text}"));
    assert!(device.ends_with(CPU_CHAIN), "{device}");
    assert!(
        device.contains("iB "),
        "memory shown in binary units: {device}"
    );
}

#[test]
fn info_explains_every_missing_builtin_runtime() {
    let out = devmm(&["info", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    let runtimes = report["runtimes"].as_array().expect("a runtimes list");
    for name in ["cpu", "cuda", "rocm"] {
        let rt = runtimes
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing from {report}"));
        if rt["available"] == false {
            let reason = rt["reason"]
                .as_str()
                .expect("a missing runtime has a reason");
            assert!(
                reason.contains(&format!("runtime \"{name}\" is unavailable")),
                "{reason}"
            );
        }
    }
}

#[test]
fn info_json_reports_cpu_memory_and_chain() {
    let out = devmm(&["info", "--json"]);
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    let cpu = report["runtimes"]
        .as_array()
        .and_then(|rts| rts.iter().find(|r| r["name"] == "cpu"))
        .expect("the cpu runtime is listed");
    assert_eq!(cpu["available"], true);
    assert_eq!(cpu["devices"], 1);
    let dev = report["devices"]
        .as_array()
        .and_then(|ds| ds.iter().find(|d| d["device"] == "cpu:0"))
        .expect("cpu:0 is listed");
    assert_eq!(dev["runtime"], "cpu");
    assert_eq!(dev["resource_chain"], CPU_CHAIN);
    let free = dev["free_bytes"].as_u64().expect("free bytes");
    let total = dev["total_bytes"].as_u64().expect("total bytes");
    assert!(0 < free && free <= total, "free {free}, total {total}");
}

/// `devmm ARGS | head -0`: stdout is a pipe whose reader is already gone.
fn devmm_into_closed_pipe(args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    // Closed before the child starts, so its first write always fails.
    drop(reader);
    Command::new(env!("CARGO_BIN_EXE_devmm"))
        .args(args)
        .env_remove("DEVMM_RUNTIME")
        .stdout(writer)
        .output()
        .expect("the devmm binary runs")
}

#[test]
fn a_reader_that_left_is_not_an_error() {
    for args in [&["info", "--json"][..], &["info"][..]] {
        let out = devmm_into_closed_pipe(args);
        assert_eq!(stderr(&out), "", "devmm {args:?}");
        assert!(out.status.success(), "devmm {args:?}: {:?}", out.status);
    }
}

#[test]
fn runtime_override_names_what_was_excluded() {
    let out = Command::new(env!("CARGO_BIN_EXE_devmm"))
        .args(["info", "--json"])
        .env("DEVMM_RUNTIME", "cpu")
        .output()
        .expect("the devmm binary runs");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    let cuda = report["runtimes"]
        .as_array()
        .and_then(|rts| rts.iter().find(|r| r["name"] == "cuda"))
        .expect("cuda is listed");
    assert_eq!(cuda["available"], false);
    assert_eq!(
        cuda["reason"],
        "not probed: DEVMM_RUNTIME=cpu limits discovery to cpu"
    );
}

fn assert_one_line_usage_error(args: &[&str], expected: &str) {
    let out = devmm(args);
    assert_eq!(out.status.code(), Some(2), "{args:?}");
    assert!(out.stdout.is_empty(), "{args:?} wrote to stdout");
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    assert!(err.starts_with("devmm: error: "), "{err}");
    assert!(err.contains(expected), "{args:?}: {err}");
}

#[test]
fn bad_flags_exit_2_with_one_line() {
    assert_one_line_usage_error(&["info", "--bogus"], "unexpected argument '--bogus'");
    assert_one_line_usage_error(&["nonsense"], "unrecognized subcommand 'nonsense'");
    assert_one_line_usage_error(&[], "name a subcommand (info");
}

#[test]
fn help_documents_every_flag() {
    let out = devmm(&["info", "--help"]);
    assert!(out.status.success());
    let help = stdout(&out);
    assert!(help.contains("--json"), "{help}");
    assert!(help.contains("Print the report as JSON"), "{help}");
}

#[test]
fn bench_json_has_a_median_and_the_raw_figure_for_every_cpu_stack_size_and_export() {
    let out = devmm(&bench_args(
        "3",
        "20",
        "4KiB",
        &["--json", "--device", "cpu"],
    ));
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    assert_eq!(
        (report["runs"].as_u64(), report["iters"].as_u64()),
        (Some(3), Some(20))
    );
    let figures = report["figures"].as_array().expect("a figures list");
    let stacks = [
        CPU_CHAIN.to_owned(),
        "HeapMemoryResource(device=cpu:0, alignment=64)".to_owned(),
        format!("StatisticsAdaptor -> {CPU_CHAIN}"),
        format!("StatisticsAdaptor -> LimitingAdaptor -> {CPU_CHAIN}"),
    ];
    for nbytes in [64u64, 256, 1024, 4096] {
        for stack in &stacks {
            let f = figures
                .iter()
                .find(|f| {
                    f["operation"] == "allocate+deallocate"
                        && f["nbytes"] == nbytes
                        && f["stack"] == stack.as_str()
                })
                .unwrap_or_else(|| panic!("no figure for {stack} at {nbytes} B"));
            assert_eq!(f["device"], "cpu:0");
            assert_eq!(f["raw"], "posix_memalign(64)+free");
            let median = f["median_ns"].as_f64().expect("median");
            let raw = f["raw_median_ns"].as_f64().expect("raw median");
            assert!(median > 0.0 && raw > 0.0, "{f}");
            let ratio = f["ratio"].as_f64().expect("ratio");
            assert!((ratio - median / raw).abs() < 1e-9 * ratio.max(1.0), "{f}");
        }
    }
    for stack in &stacks {
        let export = figures
            .iter()
            .find(|f| f["operation"] == "dlpack export+delete" && f["stack"] == stack.as_str())
            .unwrap_or_else(|| panic!("no export figure for {stack}"));
        assert_eq!(export["nbytes"], 256, "an 8 x 8 float32 tensor");
        assert_eq!(export["raw_nbytes"], 64);
        assert!(
            export["median_ns"].as_f64().is_some_and(|ns| ns > 0.0),
            "{export}"
        );
    }
    assert_eq!(figures.len(), 5 * stacks.len(), "16 KiB is past --max-size");
}

#[test]
fn bench_table_names_the_raw_allocator_and_prints_no_progress_when_piped() {
    let out = devmm(&bench_args("1", "5", "64", &[]));
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    // Nothing but the debug build's warning, when this is one.
    let expected = if cfg!(debug_assertions) { 1 } else { 0 };
    assert_eq!(
        stderr(&out).lines().count(),
        expected,
        "progress drawn on a pipe: {}",
        stderr(&out)
    );
    let text = stdout(&out);
    assert!(
        text.contains(
            "RAW for allocate+deallocate on cpu:0: posix_memalign(64)+free of the same size"
        ),
        "{text}"
    );
    assert!(
        text.contains("RAW for dlpack export+delete on cpu:0: posix_memalign(64)+free of 64 B"),
        "{text}"
    );
    let row = text
        .lines()
        .find(|l| l.starts_with("allocate+deallocate") && l.ends_with(CPU_CHAIN))
        .unwrap_or_else(|| panic!("no malloc row in:\n{text}"));
    assert!(row.contains("64 B") && row.contains('x'), "{row}");
}

#[test]
fn bench_says_loudly_when_it_is_a_debug_build() {
    let out = devmm(&bench_args("1", "2", "64", &["--json"]));
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    let err = stderr(&out);
    if cfg!(debug_assertions) {
        assert_eq!(report["build"], "debug");
        assert!(
            err.contains("DEBUG build") && err.contains("--release"),
            "{err}"
        );
        let text = stdout(&devmm(&bench_args("1", "2", "64", &[])));
        assert!(
            text.starts_with("warning: this devmm is a DEBUG build"),
            "{text}"
        );
    } else {
        assert_eq!(report["build"], "release");
        assert!(err.is_empty(), "{err}");
    }
}

#[test]
fn bench_threads_races_every_stack_against_the_raw_call_on_that_many_threads() {
    let out = devmm(&bench_args(
        "3",
        "50",
        "64",
        &["--json", "--threads", "3", "--device", "cpu"],
    ));
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    assert_eq!(report["threads"], 3);
    let figures = report["figures"].as_array().expect("a figures list");
    let counted = format!("StatisticsAdaptor -> {CPU_CHAIN}");
    let f = figures
        .iter()
        .find(|f| f["operation"] == "allocate+deallocate" && f["stack"] == counted.as_str())
        .unwrap_or_else(|| panic!("no threaded figure for {counted}"));
    let (median, raw) = (
        f["median_ns"].as_f64().unwrap(),
        f["raw_median_ns"].as_f64().unwrap(),
    );
    assert!(median > 0.0 && raw > 0.0, "{f}");
    assert!(figures
        .iter()
        .any(|f| f["operation"] == "dlpack export+delete"));
    let text = stdout(&devmm(&bench_args("1", "5", "64", &["--threads", "2"])));
    assert!(text.contains("On 2 threads at once"), "{text}");
    assert_one_line_usage_error(&["bench", "--threads", "0"], "--threads");
}

#[test]
fn bench_refuses_bad_arguments_in_one_line() {
    assert_one_line_usage_error(&["bench", "--runs", "0"], "--runs");
    assert_one_line_usage_error(&["bench", "--max-size", "4TB"], "unknown unit");
    assert_one_line_usage_error(&["bench", "--device", "tpu:0"], "--device");
    let out = devmm(&["bench", "--min-size", "1MiB", "--max-size", "64"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--min-size <= --max-size"), "{err}");
    let out = devmm(&["bench", "--device", "cuda:7"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("device cuda:7 is not available; available: cpu:0"),
        "{err}"
    );
}

#[test]
fn check_passes_on_the_cpu_with_a_line_per_check() {
    let out = devmm(&["check", "--device", "cpu:0"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}\nstderr: {}", stderr(&out));
    let checks: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("PASS") || l.starts_with("FAIL") || l.starts_with("SKIP"))
        .collect();
    assert!(checks.iter().all(|l| !l.starts_with("FAIL")), "{text}");
    for (suite, subject) in [
        ("mr_conformance", CPU_CHAIN),
        (
            "mr_conformance",
            "HeapMemoryResource(device=cpu:0, alignment=64)",
        ),
        (
            "mr_conformance",
            "StatisticsAdaptor -> MallocMemoryResource",
        ),
        ("mr_conformance", "LimitingAdaptor -> MallocMemoryResource"),
        ("mr_conformance", "LoggingAdaptor -> MallocMemoryResource"),
        ("dlpack_conformance", "cpu:0"),
    ] {
        assert!(
            checks
                .iter()
                .any(|l| l.starts_with("PASS") && l.contains(suite) && l.contains(subject)),
            "no passing {suite} line for {subject}:\n{text}"
        );
    }
    let malloc_alignment = checks
        .iter()
        .filter(|l| l.contains("alignment_promise") && l.ends_with(CPU_CHAIN) && !l.contains("->"))
        .count();
    assert_eq!(
        malloc_alignment, 1,
        "the cpu default is checked once:\n{text}"
    );
    let summary = format!("{} checks: ", checks.len());
    assert!(
        text.lines()
            .any(|l| l.starts_with(&summary) && l.contains(" 0 failed")),
        "{text}"
    );
}

#[test]
fn check_json_counts_match_its_checks() {
    let out = devmm(&["check", "--json"]);
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    let checks = report["checks"].as_array().expect("a checks list");
    for status in ["passed", "failed", "skipped"] {
        let n = checks.iter().filter(|c| c["status"] == status).count();
        assert_eq!(report[status].as_u64(), Some(n as u64), "{status}");
    }
    assert_eq!(report["failed"], 0);
    assert!(checks
        .iter()
        .any(|c| c["suite"] == "dlpack_conformance" && c["subject"] == "cpu:0"));
    assert!(
        checks
            .iter()
            .filter(|c| c["status"] == "skipped")
            .all(|c| c["detail"].as_str().is_some_and(|d| !d.is_empty())),
        "every skip says why"
    );
}

/// The command over the fake CUDA runtime and HIP libraries (`tests/fake-*`,
/// two devices each with 1 GiB), found through the loaders' path overrides.
mod over_fake_drivers {
    use super::*;

    fn devmm_with_fakes(args: &[&str]) -> Output {
        let fakes = fake_driver::fake_libraries();
        Command::new(env!("CARGO_BIN_EXE_devmm"))
            .args(args)
            .env_remove("DEVMM_RUNTIME")
            .env("DEVMM_CUDART_PATH", &fakes.cudart)
            .env("DEVMM_HIP_PATH", &fakes.hip)
            .output()
            .expect("the devmm binary runs")
    }

    #[test]
    fn info_lists_every_gpu_with_its_memory_and_chain() {
        let out = devmm_with_fakes(&["info", "--json"]);
        assert!(out.status.success(), "stderr: {}", stderr(&out));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
        for (runtime, device, resource) in [
            ("cuda", "cuda:0", "CudaRuntimeMemoryResource"),
            ("cuda", "cuda:1", "CudaRuntimeMemoryResource"),
            ("rocm", "rocm:0", "HipRuntimeMemoryResource"),
            ("rocm", "rocm:1", "HipRuntimeMemoryResource"),
        ] {
            let rt = report["runtimes"]
                .as_array()
                .and_then(|rts| rts.iter().find(|r| r["name"] == runtime))
                .expect("the runtime is listed");
            assert_eq!(
                (&rt["available"], &rt["devices"]),
                (&true.into(), &2.into()),
                "{rt}"
            );
            let dev = report["devices"]
                .as_array()
                .and_then(|ds| ds.iter().find(|d| d["device"] == device))
                .unwrap_or_else(|| panic!("{device} missing from {report}"));
            assert_eq!(dev["total_bytes"], 1u64 << 30, "{dev}");
            // What an nvidia-smi user expects: name, PCI bus id, used memory, pools.
            let ordinal: u32 = device[5..].parse().unwrap();
            let brand = if runtime == "cuda" { "CUDA" } else { "HIP" };
            assert_eq!(dev["name"], format!("Fake {brand} GPU {ordinal}"), "{dev}");
            assert_eq!(
                dev["pci_bus_id"],
                format!("0000:{:02x}:00.0", 0x10 + ordinal),
                "{dev}"
            );
            assert_eq!(dev["memory_pools"], true, "{dev}");
            let used = dev["used_bytes"].as_u64().expect("used bytes");
            let free = dev["free_bytes"].as_u64().expect("free bytes");
            assert_eq!(used + free, 1u64 << 30, "{dev}");
            if runtime == "cuda" {
                assert_eq!(dev["compute_capability"], "9.0", "{dev}");
                assert_eq!(rt["runtime_version"], "12.4", "{rt}");
                assert_eq!(rt["driver_version"], "12.4", "{rt}");
            } else {
                assert_eq!(dev["compute_capability"], serde_json::Value::Null, "{dev}");
                assert_eq!(rt["runtime_version"], "6.2.41133", "{rt}");
                // HIP's driver version is its own: only the amdgpu kernel
                // module (absent here) says the driver's.
                if !std::path::Path::new("/sys/module/amdgpu").exists() {
                    assert!(rt.get("driver_version").is_none(), "{rt}");
                }
            }
            let chain = dev["resource_chain"].as_str().expect("a chain");
            assert!(
                chain.starts_with(&format!("{resource}(device={device}, alignment=256")),
                "{chain}"
            );
        }
    }

    /// The fake CUDA runtime (12.4) has pools of pinned host memory, HIP none:
    /// `devmm info` says which source serves each runtime's pinned memory.
    #[test]
    fn info_says_where_pinned_memory_comes_from() {
        let out = devmm_with_fakes(&["info", "--json"]);
        assert!(out.status.success(), "stderr: {}", stderr(&out));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
        for (runtime, device, host_pool) in [
            ("cuda", "cuda_host:0", true),
            ("rocm", "rocm_host:0", false),
        ] {
            let rt = report["runtimes"]
                .as_array()
                .and_then(|rts| rts.iter().find(|r| r["name"] == runtime))
                .expect("the runtime is listed");
            let pinned = &rt["pinned_memory"];
            assert_eq!(
                (&pinned["device"], &pinned["host_pool"]),
                (&device.into(), &host_pool.into()),
                "{rt}"
            );
        }
        let text = stdout(&devmm_with_fakes(&["info"]));
        let section = text
            .split("Pinned memory")
            .nth(1)
            .unwrap_or_else(|| panic!("no pinned memory section in:\n{text}"));
        for (device, source) in [
            ("cuda_host:0", "stream-ordered host pool"),
            ("rocm_host:0", "page-locked allocator"),
        ] {
            let row = section
                .lines()
                .find(|l| l.starts_with(device))
                .unwrap_or_else(|| panic!("no {device} row in:\n{section}"));
            assert!(row.contains(source), "{row}");
        }
    }

    #[test]
    fn info_shows_the_device_table_an_nvidia_smi_user_expects() {
        let out = devmm_with_fakes(&["info"]);
        assert!(out.status.success(), "stderr: {}", stderr(&out));
        let text = stdout(&out);
        let row = text
            .lines()
            .find(|l| l.starts_with("cuda:1 "))
            .unwrap_or_else(|| panic!("no cuda:1 line in:\n{text}"));
        for cell in ["Fake CUDA GPU 1", "9.0", "0000:11:00.0", "yes", "1 GiB"] {
            assert!(row.contains(cell), "{cell} missing from {row}");
        }
        let header = text
            .lines()
            .find(|l| l.starts_with("DEVICE"))
            .expect("a header");
        for column in ["NAME", "CC", "PCI BUS ID", "POOLS", "USED", "FREE", "TOTAL"] {
            assert!(header.contains(column), "{header}");
        }
    }

    /// A machine with the CUDA runtime library but no driver (CI containers):
    /// every command still works on the CPU and says why CUDA is missing.
    #[test]
    fn a_library_without_a_driver_leaves_the_cpu_commands_working() {
        let fakes = fake_driver::fake_libraries();
        let run = |args: &[&str]| {
            Command::new(env!("CARGO_BIN_EXE_devmm"))
                .args(args)
                .env_remove("DEVMM_RUNTIME")
                .env("DEVMM_CUDART_PATH", &fakes.cudart)
                .env("DEVMM_HIP_PATH", "/nonexistent/libamdhip64.so")
                .env("FAKE_DRIVER_NO_DRIVER", "1")
                .output()
                .expect("the devmm binary runs")
        };
        let out = run(&["info", "--json"]);
        assert!(out.status.success(), "stderr: {}", stderr(&out));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
        let cuda = report["runtimes"]
            .as_array()
            .and_then(|rts| rts.iter().find(|r| r["name"] == "cuda"))
            .expect("cuda is listed");
        assert_eq!(cuda["available"], false, "{cuda}");
        let reason = cuda["reason"].as_str().expect("a reason");
        assert!(
            reason.contains("cudaErrorInsufficientDriver (35)"),
            "{reason}"
        );
        for args in [
            &["check", "--device", "cpu"][..],
            &bench_args("1", "2", "64", &["--device", "cpu", "--json"])[..],
        ] {
            let out = run(args);
            assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        }
    }

    /// Discovery without the override: a `libcudart.so.13` under
    /// `$CUDA_HOME/lib64` is found (here the fake, under that name).
    #[test]
    fn discovery_finds_the_runtime_under_cuda_home() {
        let fakes = fake_driver::fake_libraries();
        let home = std::env::temp_dir().join(format!("devmm-cuda-home-{}", std::process::id()));
        let lib = home.join("lib64");
        std::fs::create_dir_all(&lib).unwrap();
        let named = lib.join("libcudart.so.13");
        let _ = std::fs::remove_file(&named);
        std::os::unix::fs::symlink(&fakes.cudart, &named).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_devmm"))
            .args(["info", "--json"])
            .env_remove("DEVMM_RUNTIME")
            .env_remove("DEVMM_CUDART_PATH")
            .env("DEVMM_HIP_PATH", "/nonexistent/libamdhip64.so")
            .env("CUDA_HOME", &home)
            .env("CUDA_PATH", &home)
            .output()
            .expect("the devmm binary runs");
        std::fs::remove_dir_all(&home).unwrap();
        assert!(out.status.success(), "stderr: {}", stderr(&out));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
        let cuda = report["runtimes"]
            .as_array()
            .and_then(|rts| rts.iter().find(|r| r["name"] == "cuda"))
            .expect("cuda is listed");
        assert_eq!(cuda["available"], true, "{cuda}");
        assert_eq!(cuda["library"], named.to_string_lossy().as_ref(), "{cuda}");
    }

    #[test]
    fn check_passes_on_every_gpu() {
        let out = devmm_with_fakes(&[
            "check", "--json", "--device", "cuda:1", "--device", "rocm:0",
        ]);
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
        assert!(out.status.success(), "{report}");
        let checks = report["checks"].as_array().expect("a checks list");
        for subject in ["cuda:1", "rocm:0"] {
            assert!(
                checks.iter().any(|c| c["suite"] == "dlpack_conformance"
                    && c["subject"] == subject
                    && c["status"] == "passed"),
                "no dlpack check passed on {subject}"
            );
            assert!(
                checks.iter().any(|c| c["suite"] == "mr_conformance"
                    && c["subject"].as_str().is_some_and(|s| s.contains(subject))
                    && c["status"] == "passed"),
                "no resource check passed on {subject}"
            );
        }
        assert!(
            !checks
                .iter()
                .any(|c| c["subject"].as_str().is_some_and(|s| s.contains("cpu:0"))),
            "--device limits the run"
        );
    }

    #[test]
    fn bench_sets_gpu_stacks_against_the_platform_allocator() {
        let out = devmm_with_fakes(&bench_args(
            "1",
            "3",
            "64",
            &["--json", "--device", "cuda:0"],
        ));
        assert!(out.status.success(), "stderr: {}", stderr(&out));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
        let figures = report["figures"].as_array().expect("a figures list");
        let adapted = figures
            .iter()
            .find(|f| {
                f["operation"] == "allocate+deallocate"
                    && f["stack"]
                        .as_str()
                        .is_some_and(|s| s.starts_with("StatisticsAdaptor"))
            })
            .expect("the two-adaptor stack over the CUDA resource");
        assert_eq!(adapted["device"], "cuda:0");
        let raw = adapted["raw"].as_str().expect("a raw allocator");
        assert!(
            raw.starts_with("CudaRuntimeMemoryResource(device=cuda:0"),
            "{raw}"
        );
        assert!(figures.iter().all(|f| f["device"] == "cuda:0"));
    }
}
