//! `devmm replay`, `devmm plot` and `devmm snapshot` on traces devmm wrote
//! and on one in rmm's format.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;

use devmm::trace::TraceFormat;
use devmm::{MallocMemoryResource, MemoryResource, StatisticsAdaptor, Stream, TraceAdaptor};

mod support;

use support::devmm;

fn json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

fn rmm_log() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/rmm_log.csv")
        .display()
        .to_string()
}

/// Writes a trace of a workload through a TraceAdaptor; returns its path
/// and the peak the statistics adaptor under it saw.
fn record(dir: &Path, format: TraceFormat, name: &str) -> (PathBuf, usize) {
    let path = dir.join(name);
    let stats = Arc::new(StatisticsAdaptor::new(MallocMemoryResource::new()));
    let mr = TraceAdaptor::to_file(Arc::clone(&stats), &path, format).unwrap();
    let s = Stream::cpu();
    let mut live = Vec::new();
    for i in 0..300usize {
        let n = 64 + (i * 7919) % 100_000;
        live.push((mr.allocate(n, &s).unwrap(), n));
        if i % 4 == 3 {
            for _ in 0..2 {
                let (p, n) = live.swap_remove((i * 31) % live.len());
                // SAFETY: allocated above with `n` bytes, freed once.
                unsafe { mr.deallocate(p, n, &s).unwrap() };
            }
        }
    }
    for (p, n) in live {
        // SAFETY: as above.
        unsafe { mr.deallocate(p, n, &s).unwrap() };
    }
    (path, stats.peak_bytes())
}

#[test]
fn a_trace_we_wrote_replays_with_the_same_peak() {
    let dir = tempfile::tempdir().unwrap();
    for (format, name) in [
        (TraceFormat::Csv, "t.csv"),
        (TraceFormat::JsonLines, "t.jsonl"),
    ] {
        let (path, peak) = record(dir.path(), format, name);
        let report = json(&devmm(&[
            "replay",
            path.to_str().unwrap(),
            "--resource",
            "heap",
            "--json",
        ]));
        assert_eq!(report["events"], 600);
        assert_eq!(report["recorded_peak_bytes"], peak);
        assert_eq!(report["peak_bytes"], peak);
        assert_eq!(report["failures"], 0);
        assert_eq!(
            (report["allocations"].as_u64(), report["frees"].as_u64()),
            (Some(300), Some(300))
        );
        assert!(report["stack"]
            .as_str()
            .unwrap()
            .ends_with("HeapMemoryResource(device=cpu:0, alignment=64)"));
    }
}

#[test]
fn an_rmm_log_replays_per_thread() {
    let report = json(&devmm(&[
        "replay",
        &rmm_log(),
        "--json",
        "--adaptor",
        "tracking",
    ]));
    assert_eq!(report["threads"], 2);
    assert_eq!(report["recorded_failures"], 1);
    assert_eq!(report["recorded_peak_bytes"], 7 << 20);
    // The threads interleave freely on replay; what they allocate does not
    // change, and the peak can only be within what the trace allows.
    assert_eq!(
        (report["allocations"].as_u64(), report["frees"].as_u64()),
        (Some(4), Some(3))
    );
    assert_eq!(report["unfreed"], 1);
    let peak = report["peak_bytes"].as_u64().unwrap();
    assert!(
        (4 << 20..=(7 << 20) + (512 << 10)).contains(&peak),
        "{peak}"
    );
    assert!(report["stack"]
        .as_str()
        .unwrap()
        .starts_with("StatisticsAdaptor -> TrackingAdaptor"));
}

#[test]
fn a_limit_below_the_peak_fails_the_replay() {
    let out = devmm(&["replay", &rmm_log(), "--limit", "3MiB"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("failed on replay: the trace does not fit this stack"),
        "{text}"
    );
    let fits = devmm(&["replay", &rmm_log(), "--limit", "8MiB", "--json"]);
    assert_eq!(json(&fits)["failures"], 0);
}

#[test]
fn a_malformed_trace_is_a_line_numbered_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.csv");
    std::fs::write(
        &path,
        "Thread,Time,Action,Pointer,Size,Stream\n1,00:00:00.1,allocate,0x10,8,0\n1,00:00:00.2,free,0x10,8\n",
    )
    .unwrap();
    for sub in ["replay", "plot", "snapshot"] {
        let out = devmm(&[sub, path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1));
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(
            stderr,
            format!(
                "devmm: error: {}:3: expected 6 comma-separated fields (Thread,Time,Action,Pointer,Size,Stream), found 5\n",
                path.display()
            )
        );
    }
}

#[test]
fn plot_writes_svg_and_html_and_refuses_other_formats() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["m.svg", "m.html"] {
        let output = dir.path().join(name);
        let out = devmm(&["plot", &rmm_log(), "-o", output.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(&output).unwrap();
        assert!(text.contains("peak 7 MiB at"), "{text}");
        assert!(text.contains("device not recorded"));
        // Self-contained: nothing to fetch (the one URL is the SVG namespace).
        assert_eq!(text.matches("http").count(), 1, "{text}");
        assert!(!text.contains("<script"));
        // The time axis reads in one unit, the first tick ("0.00 ms") too.
        let ticks: Vec<&str> = text
            .split(r#"text-anchor="middle">"#)
            .skip(1)
            .filter_map(|rest| rest.split_once("</text>").map(|(label, _)| label))
            .filter(|label| !label.starts_with("time since"))
            .collect();
        assert_eq!(ticks.len(), 6, "{ticks:?}");
        let unit = |label: &str| label.rsplit(' ').next().unwrap().to_owned();
        assert!(ticks.iter().all(|t| unit(t) == unit(ticks[5])), "{ticks:?}");
    }
    let out = devmm(&[
        "plot",
        &rmm_log(),
        "-o",
        dir.path().join("m.png").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("name an .html or .svg output"));
}

#[test]
fn snapshot_writes_a_pickle_of_what_is_live_at_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("s.pickle");
    let out = devmm(&["snapshot", &rmm_log(), "-o", output.to_str().unwrap()]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("(1 live allocation(s))"));
    let bytes = std::fs::read(&output).unwrap();
    assert_eq!((&bytes[..2], bytes.last()), (&b"\x80\x02"[..], Some(&b'.')));
}

/// A trace of 3,000 recorded threads, replayed where the address space
/// (2 GiB, as `ulimit -v`) cannot hold a stack for each: the recorded
/// threads interleave on a bounded set of OS threads, so the replay runs
/// to its report instead of panicking because a thread could not start.
#[test]
fn a_trace_of_thousands_of_threads_replays_under_an_address_space_limit() {
    const THREADS: u64 = 3_000;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("threads.csv");
    let mut text = String::from("Thread,Time,Action,Pointer,Size,Stream\n");
    // Each thread allocates; each frees the block of the thread after it,
    // so the frees wait on other threads' allocations.
    for t in 0..THREADS {
        text.push_str(&format!(
            "{t},10:00:00.{t:06},allocate,{:#x},64,0\n",
            0x1000 * (t + 1)
        ));
    }
    for t in 0..THREADS {
        let owner = (t + 1) % THREADS;
        text.push_str(&format!(
            "{t},10:00:01.{t:06},free,{:#x},64,0\n",
            0x1000 * (owner + 1)
        ));
    }
    std::fs::write(&path, text).unwrap();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 2097152 && exec \"$0\" replay \"$1\" --json")
        .arg(env!("CARGO_BIN_EXE_devmm"))
        .arg(&path)
        .env_remove("DEVMM_RUNTIME")
        .output()
        .expect("sh runs");
    let report = json(&out);
    assert_eq!(report["threads"], THREADS);
    assert_eq!(
        (report["allocations"].as_u64(), report["frees"].as_u64()),
        (Some(THREADS), Some(THREADS))
    );
    assert_eq!(
        (report["failures"].as_u64(), report["unfreed"].as_u64()),
        (Some(0), Some(0))
    );
}
