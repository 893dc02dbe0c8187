//! The testing kit against everything devmm ships for the CPU, and the kit
//! against resources that break the contract (so its checks can fail).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use devmm::testing::{
    CheckStatus, ConformanceReport, MrConformanceOptions, RecordedCall, RecordingMemoryResource,
    ReportedMisuse, dlpack_conformance, mr_conformance,
};
use devmm::{
    CallbackMemoryResource, Device, DeviceBuffer, DevicePtr, Error, HeapMemoryResource,
    LimitingAdaptor, LoggingAdaptor, MallocMemoryResource, MemoryResource, MisuseKind,
    StatisticsAdaptor, Stream, runtime_for,
};

fn status<'a>(report: &'a ConformanceReport, name: &str) -> &'a CheckStatus {
    &report
        .checks()
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no check named {name} in {report}"))
        .status
}

fn assert_conforms(report: ConformanceReport) -> ConformanceReport {
    assert!(report.is_ok(), "{report}");
    assert_eq!(report.checks().len(), 10, "{report}");
    report
}

#[test]
fn malloc_resource_conforms() {
    let report = assert_conforms(mr_conformance(
        || Ok(MallocMemoryResource::new()),
        &MrConformanceOptions::new(),
    ));
    // malloc promises no misuse detection and no bookkeeping: those are skipped, not passed.
    assert!(matches!(
        status(&report, "misuse_detection"),
        CheckStatus::Skipped(_)
    ));
    assert!(matches!(
        status(&report, "live_count"),
        CheckStatus::Skipped(_)
    ));
    assert_eq!(status(&report, "write_read_exact"), &CheckStatus::Passed);
}

#[test]
fn malloc_resource_with_page_alignment_conforms() {
    assert_conforms(mr_conformance(
        || MallocMemoryResource::with_alignment(4096),
        &MrConformanceOptions::new(),
    ));
}

#[test]
fn heap_resource_conforms_including_misuse_and_bookkeeping() {
    let report = assert_conforms(mr_conformance(
        || HeapMemoryResource::with_alignment(128),
        &MrConformanceOptions::new(),
    ));
    assert_eq!(status(&report, "misuse_detection"), &CheckStatus::Passed);
    assert_eq!(status(&report, "live_count"), &CheckStatus::Passed);
}

#[test]
fn adaptor_stacks_conform() {
    let options = MrConformanceOptions::new();
    assert_conforms(mr_conformance(
        || Ok(StatisticsAdaptor::new(HeapMemoryResource::new())),
        &options,
    ));
    assert_conforms(mr_conformance(
        || Ok(LimitingAdaptor::new(HeapMemoryResource::new(), 1 << 20)),
        &options,
    ));
    assert_conforms(mr_conformance(
        || Ok(LoggingAdaptor::new(MallocMemoryResource::new())),
        &options,
    ));
    assert_conforms(mr_conformance(
        || Ok(StatisticsAdaptor::new(MallocMemoryResource::new())),
        &options,
    ));
    assert_conforms(mr_conformance(
        || Ok(LimitingAdaptor::new(MallocMemoryResource::new(), 1 << 20)),
        &options,
    ));
    assert_conforms(mr_conformance(
        || Ok(LoggingAdaptor::new(HeapMemoryResource::new())),
        &options,
    ));
    let report = assert_conforms(mr_conformance(
        || {
            Ok(StatisticsAdaptor::new(LimitingAdaptor::new(
                LoggingAdaptor::new(HeapMemoryResource::new()),
                1 << 20,
            )))
        },
        &options,
    ));
    assert_eq!(
        report.subject(),
        "StatisticsAdaptor -> LimitingAdaptor -> LoggingAdaptor -> \
         HeapMemoryResource(device=cpu:0, alignment=64)"
    );
    // Adaptors forward the checked resource's misuse detection.
    assert_eq!(status(&report, "misuse_detection"), &CheckStatus::Passed);
}

/// A callback resource over a heap resource its closures share.
fn callback_over_heap(alignment: usize) -> devmm::Result<CallbackMemoryResource> {
    let heap = Arc::new(HeapMemoryResource::with_alignment(alignment)?);
    let upstream = Arc::clone(&heap);
    CallbackMemoryResource::new(
        Device::CPU,
        alignment,
        move |n, s| heap.allocate(n, s),
        // SAFETY: the callback resource's caller upholds deallocate's contract,
        // and the heap resource reports violations as errors anyway.
        move |p, n, s| unsafe { upstream.deallocate(p, n, s) },
    )
    .map(|mr| mr.with_dereferenceable_memory(true))
}

#[test]
fn callback_resource_conforms() {
    assert_conforms(mr_conformance(
        || callback_over_heap(64),
        &MrConformanceOptions::new(),
    ));
}

#[test]
fn the_default_cpu_resource_conforms() {
    assert_conforms(mr_conformance(
        || runtime_for(Device::CPU)?.default_resource(Device::CPU),
        &MrConformanceOptions::new(),
    ));
}

#[test]
fn custom_write_read_and_stream_factory_are_used() {
    let writes = Arc::new(AtomicUsize::new(0));
    let reads = Arc::new(AtomicUsize::new(0));
    let streams = Arc::new(AtomicUsize::new(0));
    let (w, r, s) = (writes.clone(), reads.clone(), streams.clone());
    let options = MrConformanceOptions::new()
        .write(move |dst, src, stream| {
            w.fetch_add(1, Ordering::Relaxed);
            // SAFETY: the suite passes pointers it allocated with room for `src`.
            unsafe { runtime_for(stream.device())?.copy_host_to_device(dst, src, stream) }
        })
        .read(move |dst, src, stream| {
            r.fetch_add(1, Ordering::Relaxed);
            // SAFETY: as above, for `dst.len()` bytes.
            unsafe { runtime_for(stream.device())?.copy_device_to_host(dst, src, stream) }
        })
        .stream_factory(move |device| {
            s.fetch_add(1, Ordering::Relaxed);
            runtime_for(device)?.create_stream(device)
        });
    assert_conforms(mr_conformance(|| Ok(HeapMemoryResource::new()), &options));
    assert!(writes.load(Ordering::Relaxed) >= 18);
    assert!(reads.load(Ordering::Relaxed) >= 18);
    assert_eq!(streams.load(Ordering::Relaxed), 10, "one stream per check");
}

#[test]
fn recording_resource_conforms_without_data_access() {
    let report = assert_conforms(mr_conformance(
        || Ok(RecordingMemoryResource::new()),
        &MrConformanceOptions::new().without_data_access(),
    ));
    assert!(matches!(
        status(&report, "write_read_exact"),
        CheckStatus::Skipped(_)
    ));
    assert_eq!(status(&report, "misuse_detection"), &CheckStatus::Passed);
    assert_eq!(status(&report, "no_aliasing"), &CheckStatus::Passed);
}

#[test]
fn the_cpu_passes_dlpack_conformance() {
    let report = dlpack_conformance(Device::CPU);
    assert!(report.is_ok(), "{report}");
    assert_eq!(report.checks().len(), 11);
    assert!(
        report
            .checks()
            .iter()
            .all(|c| c.status == CheckStatus::Passed),
        "{report}"
    );
    report.into_result().expect("already checked");
}

#[test]
fn dlpack_conformance_reports_a_device_without_runtime() {
    // This machine has no CUDA runtime: every check fails with the reason.
    let report = dlpack_conformance(Device::cuda(0));
    if runtime_for(Device::cuda(0)).is_ok() {
        return; // a GPU machine: the CUDA suite is covered by scripts/gpu-smoke.sh
    }
    assert!(!report.is_ok());
    assert_eq!(report.failures().count(), report.checks().len());
    let failure = report.clone().into_result().unwrap_err();
    assert!(
        failure.to_string().contains("cuda:0 is unusable"),
        "{failure}"
    );
    assert_eq!(failure.report(), &report);
}

// ---- RecordingMemoryResource ----

#[test]
fn recording_shows_the_seed_example() {
    let recording = Arc::new(RecordingMemoryResource::new());
    let stream = Stream::cpu();
    let buf = DeviceBuffer::new(64, recording.clone(), &stream).unwrap();
    assert_eq!(recording.live(), BTreeMap::from([(256, 64)]));
    buf.free(&stream).unwrap();
    assert_eq!(recording.live(), BTreeMap::new());
    drop(buf);
    assert_eq!(
        recording.calls(),
        vec![
            RecordedCall::Allocate {
                nbytes: 64,
                stream: stream.clone(),
                result: Ok(DevicePtr::from_addr(256))
            },
            RecordedCall::Deallocate {
                ptr: DevicePtr::from_addr(256),
                nbytes: 64,
                stream: stream.clone(),
                result: Ok(())
            },
        ],
        "free then drop deallocates exactly once"
    );
}

#[test]
fn recording_pointers_are_deterministic_aligned_and_never_reused() {
    let s = Stream::cpu();
    let mr = RecordingMemoryResource::with_alignment(Device::cuda(1), 128).unwrap();
    assert_eq!(mr.device(), Device::cuda(1));
    let a = mr.allocate(1, &s).unwrap();
    let b = mr.allocate(200, &s).unwrap();
    let zero = mr.allocate(0, &s).unwrap();
    // SAFETY: fake pointers; the recording resource never dereferences them.
    unsafe { mr.deallocate(a, 1, &s).unwrap() };
    let c = mr.allocate(1, &s).unwrap();
    assert_eq!(
        (a.addr(), b.addr(), zero, c.addr()),
        (128, 256, DevicePtr::NULL, 512)
    );
    assert_eq!(mr.live(), BTreeMap::from([(256, 200), (512, 1)]));
    assert_eq!(mr.live_count(), Some(2));
    assert_eq!(mr.calls().len(), 5);
}

#[test]
fn recording_detects_and_logs_misuse() {
    let s = Stream::cpu();
    let mr = RecordingMemoryResource::new();
    let p = mr.allocate(64, &s).unwrap();
    let kind = |r: devmm::Result<()>| match r {
        Err(Error::Misuse { kind, .. }) => kind,
        other => panic!("expected misuse, got {other:?}"),
    };
    // SAFETY: the recording resource checks every argument; misuse is an error.
    unsafe {
        assert_eq!(
            kind(mr.deallocate(DevicePtr::from_addr(4096), 64, &s)),
            MisuseKind::UnknownPointer
        );
        assert_eq!(
            kind(mr.deallocate(p, 65, &s)),
            MisuseKind::WrongSize { allocated: 64 }
        );
        mr.deallocate(p, 64, &s).unwrap();
        assert_eq!(kind(mr.deallocate(p, 64, &s)), MisuseKind::DoubleFree);
    }
    let calls = mr.calls();
    assert_eq!(calls.len(), 5);
    assert!(matches!(
        &calls[2],
        RecordedCall::Deallocate { ptr, nbytes: 65, result: Err(Error::Misuse { .. }), .. } if *ptr == p
    ));
}

#[test]
fn recording_runs_out_of_fake_address_space() {
    let s = Stream::cpu();
    let mr = RecordingMemoryResource::new().with_capacity(1024);
    mr.allocate(1000, &s).unwrap();
    let err = mr.allocate(100, &s).unwrap_err();
    assert!(err.is_out_of_memory(), "{err}");
    assert!(
        err.to_string()
            .contains("RecordingMemoryResource(device=cpu:0, alignment=256)")
    );
    assert!(mr.allocate(usize::MAX, &s).unwrap_err().is_out_of_memory());
    let info = mr.available_memory().unwrap();
    assert_eq!((info.free, info.total), (0, 1024));
}

// ---- the kit catches broken resources ----

/// Hands out pointers 8 bytes off the alignment it promises.
#[derive(Debug)]
struct Misaligned(HeapMemoryResource);

impl MemoryResource for Misaligned {
    fn allocate(&self, nbytes: usize, stream: &Stream) -> devmm::Result<DevicePtr> {
        if nbytes == 0 {
            return Ok(DevicePtr::NULL);
        }
        let padded = nbytes.checked_add(8).ok_or(Error::OutOfMemory {
            device: Device::CPU,
            nbytes,
            chain: "Misaligned".into(),
            detail: None,
            pool: None,
        })?;
        let p = self.0.allocate(padded, stream)?;
        Ok(p.offset(8).expect("in range"))
    }
    unsafe fn deallocate(
        &self,
        ptr: DevicePtr,
        nbytes: usize,
        stream: &Stream,
    ) -> devmm::Result<()> {
        if nbytes == 0 {
            return Ok(());
        }
        let base = DevicePtr::from_addr(ptr.addr() - 8);
        // SAFETY: `base` is what the heap resource handed out for `nbytes + 8`.
        unsafe { self.0.deallocate(base, nbytes + 8, stream) }
    }
    fn device(&self) -> Device {
        Device::CPU
    }
    fn guaranteed_alignment(&self) -> usize {
        64
    }
    fn available_memory(&self) -> devmm::Result<devmm::MemoryInfo> {
        self.0.available_memory()
    }
    /// Real host memory: the suite's default copies may reach it.
    fn dereferenceable(&self) -> bool {
        true
    }
}

#[test]
fn a_misaligned_resource_fails_alignment_honesty_only() {
    let report = mr_conformance(
        || Ok(Misaligned(HeapMemoryResource::new())),
        &MrConformanceOptions::new(),
    );
    let failed: Vec<_> = report.failures().map(|c| c.name).collect();
    assert_eq!(failed, ["alignment_honesty"], "{report}");
    assert!(
        report.to_string().contains("FAILED alignment_honesty"),
        "{report}"
    );
}

/// Two live allocations share memory; bookkeeping lies; misuse is accepted; huge requests panic.
#[derive(Debug, Default)]
struct Broken {
    live: AtomicUsize,
}

static SHARED: [u64; 1024] = [0; 1024];

impl MemoryResource for Broken {
    fn allocate(&self, nbytes: usize, _: &Stream) -> devmm::Result<DevicePtr> {
        assert!(nbytes < 1 << 40, "Broken cannot allocate {nbytes} bytes");
        self.live.fetch_add(2, Ordering::Relaxed);
        Ok(DevicePtr::from_addr(SHARED.as_ptr() as usize))
    }
    unsafe fn deallocate(&self, _: DevicePtr, _: usize, _: &Stream) -> devmm::Result<()> {
        self.live.fetch_sub(1, Ordering::Relaxed);
        Ok(())
    }
    fn device(&self) -> Device {
        Device::CPU
    }
    fn guaranteed_alignment(&self) -> usize {
        8
    }
    fn available_memory(&self) -> devmm::Result<devmm::MemoryInfo> {
        Ok(devmm::MemoryInfo { free: 0, total: 0 })
    }
    fn detects_misuse(&self) -> bool {
        true
    }
    fn live_count(&self) -> Option<usize> {
        Some(self.live.load(Ordering::Relaxed))
    }
}

#[test]
fn a_broken_resource_fails_each_check_it_breaks_without_crashing_the_suite() {
    // Data access off: the shared block is read-only static memory.
    let report = mr_conformance(
        || Ok(Broken::default()),
        &MrConformanceOptions::new().without_data_access(),
    );
    let failed: Vec<_> = report.failures().map(|c| c.name).collect();
    assert_eq!(
        failed,
        [
            "zero_byte",
            "no_aliasing",
            "live_count",
            "misuse_detection",
            "failures_are_errors",
            "concurrent_use"
        ],
        "{report}"
    );
    let CheckStatus::Failed(why) = status(&report, "failures_are_errors") else {
        unreachable!()
    };
    assert!(
        why.starts_with("panicked instead of returning an error"),
        "{why}"
    );
    let err = report.into_result().unwrap_err();
    assert!(
        err.to_string()
            .contains("FAILED no_aliasing: live allocations overlap"),
        "{err}"
    );
}

#[test]
fn a_failing_factory_is_reported() {
    let report = mr_conformance(
        || MallocMemoryResource::with_alignment(3),
        &MrConformanceOptions::new(),
    );
    assert_eq!(
        report.failures().map(|c| c.name).collect::<Vec<_>>(),
        ["factory"]
    );
    assert!(
        report
            .to_string()
            .contains("alignment must be a power of two"),
        "{report}"
    );
}

/// Tracks pointers, but accepts a wrong size and frees anyway: a resource
/// whose misuse detection is only half there.
#[derive(Debug, Default)]
struct SizeBlind {
    live: std::sync::Mutex<std::collections::HashSet<usize>>,
}

impl MemoryResource for SizeBlind {
    fn allocate(&self, nbytes: usize, stream: &Stream) -> devmm::Result<DevicePtr> {
        let p = MallocMemoryResource::new().allocate(nbytes, stream)?;
        if !p.is_null() {
            self.live.lock().unwrap().insert(p.addr());
        }
        Ok(p)
    }
    unsafe fn deallocate(
        &self,
        ptr: DevicePtr,
        nbytes: usize,
        stream: &Stream,
    ) -> devmm::Result<()> {
        if !ptr.is_null() && !self.live.lock().unwrap().remove(&ptr.addr()) {
            return Err(Error::Misuse {
                kind: devmm::MisuseKind::UnknownPointer,
                ptr,
                nbytes,
                device: Device::CPU,
                resource: "SizeBlind".into(),
                test_double: false,
            });
        }
        // SAFETY: `ptr` was live in our table, so malloc handed it out.
        unsafe { MallocMemoryResource::new().deallocate(ptr, nbytes, stream) }
    }
    fn device(&self) -> Device {
        Device::CPU
    }
    fn guaranteed_alignment(&self) -> usize {
        64
    }
    fn available_memory(&self) -> devmm::Result<devmm::MemoryInfo> {
        MallocMemoryResource::new().available_memory()
    }
    /// Real host memory: the suite's default copies may reach it.
    fn dereferenceable(&self) -> bool {
        true
    }
    fn detects_misuse(&self) -> bool {
        true
    }
}

/// The suite forgets a pointer the resource freed on a call it expected to
/// be refused, so it reports the lie instead of freeing the memory twice.
#[test]
fn a_resource_that_frees_on_a_wrong_size_is_reported_not_double_freed() {
    let report = mr_conformance(|| Ok(SizeBlind::default()), &MrConformanceOptions::new());
    let failed: Vec<_> = report.failures().map(|c| c.name).collect();
    assert_eq!(failed, ["misuse_detection"], "{report}");
    let CheckStatus::Failed(why) = status(&report, "misuse_detection") else {
        unreachable!()
    };
    assert!(
        why.contains("deallocating with the wrong size was accepted"),
        "{why}"
    );
}

/// Every kind of misuse is tried and each miss named as the seed names it:
/// `SizeBlind` forgets a freed pointer, so it calls a double free a foreign
/// one, besides taking a wrong size.
#[test]
fn each_missed_misuse_is_named_a_double_free_included() {
    let report = mr_conformance(|| Ok(SizeBlind::default()), &MrConformanceOptions::new());
    let CheckStatus::Failed(why) = status(&report, "misuse_detection") else {
        panic!("{report}")
    };
    assert!(
        why.contains("double-free: deallocating twice was reported as foreign-free"),
        "{why}"
    );
    assert!(
        why.contains("size-mismatch: deallocating with the wrong size was accepted"),
        "{why}"
    );
    assert!(
        !why.contains("foreign-free: deallocating a pointer never"),
        "{why}"
    );
}

#[test]
fn default_copies_never_touch_pointers_that_are_not_memory() {
    // The recording resource's addresses are fake: copying to them would crash
    // the process, so the byte checks fail, named, and say what to pass.
    let report = mr_conformance(
        || Ok(RecordingMemoryResource::new()),
        &MrConformanceOptions::new(),
    );
    for check in ["write_read_exact", "no_aliasing"] {
        let CheckStatus::Failed(why) = status(&report, check) else {
            panic!("{check} touched fake memory: {report}");
        };
        assert!(
            why.contains("dereferenceable") && why.contains("data access off"),
            "{why}"
        );
    }
    assert_eq!(status(&report, "alignment_honesty"), &CheckStatus::Passed);
}

#[test]
fn requested_alignments_are_checked_with_an_aligned_factory() {
    let honest = MrConformanceOptions::new().aligned_factory(|alignment| {
        let mr: Box<dyn MemoryResource> =
            Box::new(MallocMemoryResource::with_alignment(alignment)?);
        Ok(mr)
    });
    let report = assert_conforms(mr_conformance(|| Ok(MallocMemoryResource::new()), &honest));
    assert_eq!(status(&report, "requested_alignment"), &CheckStatus::Passed);
    // Without one the check is skipped, named.
    let report = mr_conformance(
        || Ok(MallocMemoryResource::new()),
        &MrConformanceOptions::new(),
    );
    assert!(matches!(
        status(&report, "requested_alignment"),
        CheckStatus::Skipped(_)
    ));
    // A factory that ignores the alignment asked of it fails the check.
    let deaf = MrConformanceOptions::new().aligned_factory(|_| {
        let mr: Box<dyn MemoryResource> = Box::new(MallocMemoryResource::with_alignment(8)?);
        Ok(mr)
    });
    let report = mr_conformance(|| Ok(MallocMemoryResource::new()), &deaf);
    let CheckStatus::Failed(why) = status(&report, "requested_alignment") else {
        panic!("an ignored alignment passed: {report}");
    };
    assert!(why.contains("was requested, but allocate("), "{why}");
}

/// One fixed non-null address for every zero-byte request: two live
/// zero-byte blocks would be one, so `zero_byte` fails; null for each (every
/// devmm resource's answer) passes.
#[test]
fn zero_byte_wants_live_non_null_blocks_distinct() {
    let one_address = |zero: DevicePtr| {
        move || {
            CallbackMemoryResource::new(
                Device::CPU,
                64,
                move |n, _| match n {
                    0 => Ok(zero),
                    _ => Err(Error::InvalidArgument {
                        reason: "zero bytes only".into(),
                    }),
                },
                |_, _, _| Ok(()),
            )
        }
    };
    let options = MrConformanceOptions::new().only(["zero_byte"]);
    let report = mr_conformance(one_address(DevicePtr::from_addr(0x1000)), &options);
    let CheckStatus::Failed(why) = status(&report, "zero_byte") else {
        panic!("one address for two live zero-byte blocks passed: {report}");
    };
    assert!(
        why.starts_with("two zero-byte allocations held at once both returned 0x1000"),
        "{why}"
    );
    let report = mr_conformance(one_address(DevicePtr::NULL), &options);
    assert_eq!(
        status(&report, "zero_byte"),
        &CheckStatus::Passed,
        "{report}"
    );
}

/// A required check fails where it would be skipped and passes as before
/// where the resource supports it; unrequired ones still skip.
#[test]
fn required_checks_fail_instead_of_skipping() {
    let options = MrConformanceOptions::new().requiring(["live_count", "misuse_detection"]);
    let report = mr_conformance(|| Ok(MallocMemoryResource::new()), &options);
    for name in ["live_count", "misuse_detection"] {
        let CheckStatus::Failed(why) = status(&report, name) else {
            panic!("{name} passed unsupported: {report}");
        };
        assert!(
            why.starts_with("required, but the resource does not"),
            "{why}"
        );
    }
    assert!(matches!(
        status(&report, "requested_alignment"),
        CheckStatus::Skipped(_)
    ));
    assert_conforms(mr_conformance(|| Ok(HeapMemoryResource::new()), &options));
    let misspelt = MrConformanceOptions::new()
        .only(["live_count"])
        .requiring(["live_cout"]);
    let report = mr_conformance(|| Ok(HeapMemoryResource::new()), &misspelt);
    let CheckStatus::Failed(why) = status(&report, "requiring") else {
        panic!("a misspelt required check passed: {report}");
    };
    assert!(why.starts_with("no check is named live_cout;"), "{why}");
}

/// A resource tested on its own refusals: one that accepts every free, or
/// refuses in terms `is_misuse` does not take, fails `misuse_detection`;
/// a wrong size never reaches it.
#[test]
fn reported_misuse_checks_the_resources_own_refusals() {
    let frees = Arc::new(AtomicUsize::new(0));
    let over_heap = |refuse: bool, frees: Arc<AtomicUsize>| {
        let heap = Arc::new(HeapMemoryResource::new());
        let (alloc, free) = (Arc::clone(&heap), heap);
        CallbackMemoryResource::new(
            Device::CPU,
            64,
            move |n, s| alloc.allocate(n, s),
            move |p, n, s| {
                frees.fetch_add(1, Ordering::Relaxed);
                // SAFETY: the heap resource checks every pointer and size.
                let freed = unsafe { free.deallocate(p, n, s) };
                match (freed, refuse) {
                    (Err(_), true) => Err(Error::Refused {
                        reason: "not mine".into(),
                    }),
                    _ => Ok(()),
                }
            },
        )
        .unwrap()
    };
    let refusals = |mr: CallbackMemoryResource| {
        ReportedMisuse::new(mr, |e| matches!(e, Error::Refused { .. }), || None)
    };
    let options = MrConformanceOptions::new().only(["misuse_detection"]);
    let report = mr_conformance(|| Ok(refusals(over_heap(true, frees.clone()))), &options);
    assert!(report.is_ok(), "{report}");
    let report = mr_conformance(|| Ok(refusals(over_heap(false, frees.clone()))), &options);
    let CheckStatus::Failed(why) = status(&report, "misuse_detection") else {
        panic!("accepting every free passed: {report}");
    };
    assert!(why.contains("was accepted"), "{why}");
    let not_misuse = |mr| ReportedMisuse::new(mr, |_| false, || None);
    let report = mr_conformance(|| Ok(not_misuse(over_heap(true, frees.clone()))), &options);
    let CheckStatus::Failed(why) = status(&report, "misuse_detection") else {
        panic!("a refusal not taken for misuse passed: {report}");
    };
    assert!(why.contains("not Error::Misuse"), "{why}");

    let mr = refusals(over_heap(true, frees.clone()));
    let stream = Stream::cpu();
    let ptr = mr.allocate(64, &stream).unwrap();
    let before = frees.load(Ordering::Relaxed);
    // SAFETY: a wrong size, refused before the resource sees it.
    let wrong = unsafe { mr.deallocate(ptr, 32, &stream) };
    assert!(matches!(
        wrong,
        Err(Error::Misuse {
            kind: MisuseKind::WrongSize { allocated: 64 },
            ..
        })
    ));
    assert_eq!(frees.load(Ordering::Relaxed), before);
    // Null with zero bytes, what a zero-byte allocation may return, is
    // freed here too, as `Checked` frees it in use.
    // SAFETY: the null pointer with zero bytes frees nothing.
    unsafe { mr.deallocate(DevicePtr::NULL, 0, &stream).unwrap() };
    assert_eq!(frees.load(Ordering::Relaxed), before);
    // SAFETY: allocated above with 64 bytes, freed once.
    unsafe { mr.deallocate(ptr, 64, &stream).unwrap() };
}

#[test]
fn only_runs_the_named_checks_and_reports_unknown_names() {
    let options = MrConformanceOptions::new().only(["zero_byte", "misuse_detection"]);
    let report = mr_conformance(|| Ok(HeapMemoryResource::new()), &options);
    let names: Vec<&str> = report.checks().iter().map(|c| c.name).collect();
    assert_eq!(names, ["zero_byte", "misuse_detection"], "{report}");
    assert!(report.is_ok(), "{report}");

    let options = MrConformanceOptions::new().only(["zero_byte", "no_such_check"]);
    let report = mr_conformance(|| Ok(HeapMemoryResource::new()), &options);
    let CheckStatus::Failed(reason) = status(&report, "only") else {
        panic!("an unknown check name passed: {report}");
    };
    assert!(
        reason.contains("no_such_check") && reason.contains("live_count"),
        "{reason}"
    );
    assert_eq!(status(&report, "zero_byte"), &CheckStatus::Passed);
}
