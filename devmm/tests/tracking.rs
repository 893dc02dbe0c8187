//! The tracking adaptor: live allocations with their call sites, reports
//! grouped by site naming the right file and line, the exit-time report.

use std::process::Command;
use std::sync::Arc;

use devmm::{DeviceBuffer, MallocMemoryResource, MemoryResource, Stream, TrackingAdaptor};

/// Allocates `n` bytes; the allocation's call site is the line marked.
#[inline(never)]
fn leak_from_here(mr: &Arc<TrackingAdaptor<MallocMemoryResource>>, n: usize) -> DeviceBuffer {
    let shared: Arc<dyn MemoryResource> = mr.clone();
    DeviceBuffer::new(n, shared, &Stream::cpu()).unwrap() // LEAK SITE
}

/// The line of this file holding `marker`.
fn line_of(marker: &str) -> u32 {
    let source = include_str!("tracking.rs");
    let index = source
        .lines()
        .position(|l| l.ends_with(marker))
        .expect("the marker is in this file");
    index as u32 + 1
}

#[test]
fn the_report_names_the_file_and_line_that_allocated() {
    let mr = Arc::new(TrackingAdaptor::new(MallocMemoryResource::new()));
    let kept: Vec<DeviceBuffer> = (0..3).map(|_| leak_from_here(&mr, 100)).collect();
    let other = {
        let shared: Arc<dyn MemoryResource> = mr.clone();
        DeviceBuffer::new(1000, shared, &Stream::cpu()).unwrap() // OTHER SITE
    };
    let freed = leak_from_here(&mr, 7);
    drop(freed);

    let report = mr.report();
    assert_eq!((report.live_allocations(), report.live_bytes()), (4, 1300));
    // Most live bytes first: the single 1000-byte allocation, then the three.
    let [big, small] = &report.groups[..] else {
        panic!("two call sites expected: {report}");
    };
    assert_eq!((big.allocations, big.bytes), (1, 1000));
    assert_eq!((small.allocations, small.bytes), (3, 300));
    let top = &small.frames[0];
    assert!(
        top.file.as_deref().unwrap().ends_with("tests/tracking.rs"),
        "{top}"
    );
    assert_eq!(top.line, Some(line_of("// LEAK SITE")), "{report}");
    assert!(top.function.ends_with("leak_from_here"), "{top}");
    assert_eq!(big.frames[0].line, Some(line_of("// OTHER SITE")));

    let text = report.to_string();
    assert!(
        text.starts_with("devmm leak report: 4 live allocations (1300 bytes) on cpu:0 through TrackingAdaptor -> MallocMemoryResource"),
        "{text}"
    );
    let expected = format!(
        "300 bytes in 3 allocations at {}:{} in ",
        top.file.as_deref().unwrap(),
        line_of("// LEAK SITE")
    );
    assert!(text.contains(&expected), "{text}");

    let leaks = mr.leaks();
    assert_eq!(leaks.len(), 4);
    assert!(
        leaks
            .iter()
            .all(|l| l.stream == 0 && l.thread == devmm::trace::current_thread_id())
    );
    drop(kept);
    drop(other);
    assert_eq!((mr.leaks().len(), mr.live_bytes()), (0, 0));
}

#[test]
fn depth_zero_captures_no_site() {
    let mr = TrackingAdaptor::with_depth(MallocMemoryResource::new(), 0);
    let s = Stream::cpu();
    let p = mr.allocate(8, &s).unwrap();
    let report = mr.report();
    assert!(report.groups[0].frames.is_empty());
    assert!(report.to_string().contains("unknown call site"));
    // SAFETY: allocated above, freed once.
    unsafe { mr.deallocate(p, 8, &s).unwrap() };
}

#[test]
fn the_torch_snapshot_holds_each_live_allocation_as_a_segment() {
    let mr = TrackingAdaptor::new(MallocMemoryResource::new());
    let s = Stream::cpu();
    let p = mr.allocate(48, &s).unwrap();
    let snapshot = mr.torch_snapshot();
    assert_eq!(snapshot.segment_count(), 1);
    let pickle = snapshot.to_pickle();
    assert!(pickle.windows(16).any(|w| w == b"active_allocated"));
    // SAFETY: allocated above, freed once.
    unsafe { mr.deallocate(p, 48, &s).unwrap() };
    assert_eq!(mr.torch_snapshot().segment_count(), 0);
}

/// Set only by [`run_child`] on the test binary it re-executes: the test
/// named by the filter then runs [`leaking_child`] instead of its checks.
const CHILD_ENV: &str = "DEVMM_TRACKING_CHILD";

/// The child's body, not a test of its own (it would pass trivially):
/// leaks through a tracking adaptor that lives until exit, and one dropped
/// with a leak. Not inlined, so the reports name this function.
#[inline(never)]
fn leaking_child() {
    let mr = Box::leak(Box::new(TrackingAdaptor::new(MallocMemoryResource::new())));
    let _lost = mr.allocate(4096, &Stream::cpu()).unwrap(); // EXIT LEAK
    let dropped = TrackingAdaptor::new(MallocMemoryResource::new());
    let _lost = dropped.allocate(16, &Stream::cpu()).unwrap(); // DROP LEAK
    drop(dropped);
}

/// Whether this process is the child [`run_child`] started.
fn is_child() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
}

/// Re-runs this test binary on exactly the test `name` (the caller) with
/// [`CHILD_ENV`] set, so that test runs [`leaking_child`]; returns its stderr.
fn run_child(name: &str, report: Option<&str>) -> String {
    let mut child = Command::new(std::env::current_exe().unwrap());
    child
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1");
    match report {
        Some(value) => child.env(devmm::LEAK_REPORT_ENV, value),
        None => child.env_remove(devmm::LEAK_REPORT_ENV),
    };
    let out = child.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The filter matched the one test: the child really ran.
    assert!(stdout.contains("1 passed"), "{stdout}");
    stderr
}

/// `/abs/path/devmm/tests/tracking.rs:LINE in tracking::leaking_child` as reports write it.
fn site(marker: &str) -> String {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tracking.rs");
    format!(
        "{}:{} in tracking::leaking_child",
        file.display(),
        line_of(marker)
    )
}

#[test]
fn devmm_leak_report_prints_at_drop_and_at_exit() {
    if is_child() {
        return leaking_child();
    }
    let stderr = run_child("devmm_leak_report_prints_at_drop_and_at_exit", Some("1"));
    let drop_site = format!("16 bytes in 1 allocation at {}", site("// DROP LEAK"));
    let exit_site = format!("4096 bytes in 1 allocation at {}", site("// EXIT LEAK"));
    let (drop_at, exit_at) = (stderr.find(&drop_site), stderr.find(&exit_site));
    assert!(drop_at.is_some() && exit_at.is_some(), "{stderr}");
    // The dropped adaptor reports when dropped, the other at exit, after it.
    assert!(drop_at < exit_at, "{stderr}");
    assert_eq!(stderr.matches("devmm leak report").count(), 2, "{stderr}");
}

#[test]
fn without_devmm_leak_report_nothing_is_printed() {
    if is_child() {
        return leaking_child();
    }
    let name = "without_devmm_leak_report_nothing_is_printed";
    assert!(!run_child(name, None).contains("leak report"));
    assert!(!run_child(name, Some("0")).contains("leak report"));
}

#[test]
fn a_refused_free_leaves_the_allocation_live() {
    let mr = TrackingAdaptor::new(devmm::HeapMemoryResource::new());
    let s = Stream::cpu();
    let p = mr.allocate(64, &s).unwrap();
    // SAFETY: the heap resource detects the wrong size and refuses it.
    let refused = unsafe { mr.deallocate(p, 32, &s) };
    assert!(refused.is_err());
    assert_eq!(mr.live_bytes(), 64);
    // SAFETY: the right size this time, freed once.
    unsafe { mr.deallocate(p, 64, &s).unwrap() };
    assert_eq!(mr.live_bytes(), 0);
}

#[test]
fn addresses_reused_across_threads_keep_their_records() {
    let mr = Arc::new(TrackingAdaptor::with_depth(MallocMemoryResource::new(), 0));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let mr = Arc::clone(&mr);
            std::thread::spawn(move || {
                let s = Stream::cpu();
                let mut kept = Vec::new();
                for i in 0..2000 {
                    let p = mr.allocate(48, &s).unwrap();
                    if i % 100 == 0 {
                        kept.push(p);
                    } else {
                        // SAFETY: allocated just above, freed once.
                        unsafe { mr.deallocate(p, 48, &s).unwrap() };
                    }
                }
                kept
            })
        })
        .collect();
    let kept: Vec<_> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    // Every address another thread freed and got back is recorded once.
    assert_eq!((mr.leaks().len(), mr.live_bytes()), (80, 80 * 48));
    for p in kept {
        // SAFETY: each kept pointer was allocated with 48 bytes, freed once.
        unsafe { mr.deallocate(p, 48, &Stream::cpu()).unwrap() };
    }
}

/// An upstream that hands out one fake address (never dereferenced) and,
/// while freeing it, runs a hook: the moment another thread may be given
/// the same address.
#[derive(Default)]
struct OneAddress {
    #[allow(clippy::type_complexity)]
    on_free: std::sync::Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl std::fmt::Debug for OneAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OneAddress")
    }
}

impl MemoryResource for OneAddress {
    fn allocate(&self, _nbytes: usize, _stream: &Stream) -> devmm::Result<devmm::DevicePtr> {
        Ok(devmm::DevicePtr::from_addr(0x1000))
    }
    unsafe fn deallocate(&self, _: devmm::DevicePtr, _: usize, _: &Stream) -> devmm::Result<()> {
        let hook = self.on_free.lock().unwrap().take();
        if let Some(hook) = hook {
            hook();
        }
        Ok(())
    }
    fn device(&self) -> devmm::Device {
        devmm::Device::CPU
    }
    fn guaranteed_alignment(&self) -> usize {
        1
    }
    fn available_memory(&self) -> devmm::Result<devmm::MemoryInfo> {
        Ok(devmm::MemoryInfo { free: 0, total: 0 })
    }
}

#[test]
fn an_address_handed_out_again_during_its_free_keeps_its_new_record() {
    let mr = Arc::new(TrackingAdaptor::with_depth(OneAddress::default(), 0));
    let s = Stream::cpu();
    let p = mr.allocate(8, &s).unwrap();
    let other = Arc::clone(&mr);
    *mr.get_upstream().on_free.lock().unwrap() = Some(Box::new(move || {
        // Another thread gets the address back before the free returns.
        std::thread::spawn(move || other.allocate(16, &Stream::cpu()).unwrap())
            .join()
            .unwrap();
    }));
    // SAFETY: `p` came from `mr.allocate(8, ..)`; the fake is never dereferenced.
    unsafe { mr.deallocate(p, 8, &s).unwrap() };
    let leaks = mr.leaks();
    assert_eq!(
        leaks.len(),
        1,
        "the second allocation's record survives the first's free"
    );
    assert_eq!(leaks[0].nbytes, 16);
}
