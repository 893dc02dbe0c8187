//! The trace adaptor and the trace reader: what is written reads back,
//! in order, with the peak the statistics adaptor saw.

use std::sync::{Arc, Mutex};
use std::thread;

use devmm::trace::{Action, Timeline, TraceFormat, parse_trace, torch_snapshot_of_trace};
use devmm::{
    LimitingAdaptor, MallocMemoryResource, MemoryResource, StatisticsAdaptor, Stream, TraceAdaptor,
};

/// A `Write` shared with the test, so the trace can be read while the
/// adaptor lives.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Shared {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

fn workload(mr: &Arc<dyn MemoryResource>, threads: usize) {
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let mr = Arc::clone(mr);
            thread::spawn(move || {
                let s = Stream::cpu();
                let mut live = Vec::new();
                for i in 0..200 {
                    let n = 16 + (t * 7 + i * 13) % 500;
                    live.push((mr.allocate(n, &s).unwrap(), n));
                    if i % 3 == 2 {
                        let (p, n) = live.remove(i % live.len());
                        // SAFETY: allocated above with `n` bytes, freed once.
                        unsafe { mr.deallocate(p, n, &s).unwrap() };
                    }
                }
                for (p, n) in live {
                    // SAFETY: as above.
                    unsafe { mr.deallocate(p, n, &s).unwrap() };
                }
            })
        })
        .collect();
    handles.into_iter().for_each(|h| h.join().unwrap());
}

#[test]
fn a_single_thread_trace_reads_back_with_the_peak_the_statistics_saw() {
    for format in [TraceFormat::Csv, TraceFormat::JsonLines] {
        let out = Shared::default();
        let stats = Arc::new(StatisticsAdaptor::new(MallocMemoryResource::new()));
        let traced: Arc<dyn MemoryResource> =
            Arc::new(TraceAdaptor::new(Arc::clone(&stats), out.clone(), format).unwrap());
        workload(&traced, 1);
        let events = parse_trace(&out.text(), "memory").unwrap();
        assert_eq!(events.len(), 400);
        assert_eq!(Timeline::of(&events).peak_bytes(), stats.peak_bytes());
        let allocations = events
            .iter()
            .filter(|e| e.action == Action::Allocate)
            .count();
        assert_eq!(allocations, 200);
    }
}

#[test]
fn lines_from_many_threads_stay_whole_and_consistent() {
    let out = Shared::default();
    let traced: Arc<dyn MemoryResource> = Arc::new(
        TraceAdaptor::new(MallocMemoryResource::new(), out.clone(), TraceFormat::Csv).unwrap(),
    );
    workload(&traced, 4);
    // The reader checks every free against a live allocation of the same
    // size: addresses reused across threads must appear freed before reused.
    let events = parse_trace(&out.text(), "memory").unwrap();
    assert_eq!(events.len(), 4 * 400);
    let mut threads: Vec<u64> = events.iter().map(|e| e.thread).collect();
    threads.sort_unstable();
    threads.dedup();
    assert_eq!(threads.len(), 4);
    assert!(events.windows(2).all(|w| w[0].time_ns <= w[1].time_ns));
}

#[test]
fn refused_allocations_are_allocate_failure_lines() {
    let out = Shared::default();
    let mr = TraceAdaptor::new(
        LimitingAdaptor::new(MallocMemoryResource::new(), 100),
        out.clone(),
        TraceFormat::Csv,
    )
    .unwrap();
    let error = mr.allocate(1000, &Stream::cpu()).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("TraceAdaptor -> LimitingAdaptor"),
        "{error}"
    );
    let text = out.text();
    let line = text.lines().nth(1).unwrap();
    assert!(line.ends_with(",allocate failure,(nil),1000,0"), "{line}");
}

#[inline(never)]
fn allocate_here(mr: &dyn MemoryResource) -> devmm::DevicePtr {
    mr.allocate(32, &Stream::cpu()).unwrap() // TRACED SITE
}

#[test]
fn json_lines_carry_the_device_and_the_call_site() {
    let out = Shared::default();
    let mr = TraceAdaptor::new(
        MallocMemoryResource::new(),
        out.clone(),
        TraceFormat::JsonLines,
    )
    .unwrap()
    .with_call_sites(32);
    let p = allocate_here(&mr);
    let events = parse_trace(&out.text(), "memory").unwrap();
    let event = &events[0];
    assert_eq!(event.device, Some(devmm::Device::CPU));
    let top = &event.frames[0];
    let line = include_str!("trace.rs")
        .lines()
        .position(|l| l.ends_with("// TRACED SITE"))
        .unwrap() as u32
        + 1;
    assert!(
        top.file.as_deref().unwrap().ends_with("tests/trace.rs"),
        "{top}"
    );
    assert_eq!(top.line, Some(line));
    let snapshot = torch_snapshot_of_trace(&events);
    assert_eq!(snapshot.segment_count(), 1);
    // SAFETY: allocated above, freed once.
    unsafe { mr.deallocate(p, 32, &Stream::cpu()).unwrap() };
}

#[test]
fn malformed_traces_name_the_line() {
    let cases = [
        ("", "t:1: the trace is empty"),
        ("Thread,Time\n", "t:1: expected rmm's CSV header"),
        (
            "Thread,Time,Action,Pointer,Size,Stream\n1,00:00:00.1,allocate,0x10,8,0\n\n1,00:00:00.2,free,0x10,9,0\n",
            "t:4: free of 0x10 with 9 bytes, but line 2 allocated 8",
        ),
        (
            "Thread,Time,Action,Pointer,Size,Stream\n1,00:00:00.1,allocate,0x10,8,0\n1,00:00:00.2,allocate,0x10,8,0\n",
            "t:3: allocate of 0x10, which line 2 allocated and no line freed",
        ),
        (
            "Thread,Time,Action,Pointer,Size,Stream\n1,00:00:00.1,allocate,0x10\n",
            "t:2: expected 6 comma-separated fields",
        ),
        ("{\"thread\": 1}\nnot json\n", "t:1: no \"action\" field"),
        (
            "{\"thread\":1,\"time_ns\":1,\"action\":\"free\",\"ptr\":0,\"size\":0,\"stream\":0}\nnot json\n",
            "t:2: not a JSON object",
        ),
    ];
    for (text, expected) in cases {
        let error = parse_trace(text, "t").unwrap_err().to_string();
        assert!(
            error.starts_with(expected),
            "{error:?} should start with {expected:?}"
        );
    }
}

#[test]
fn csv_times_past_midnight_keep_increasing() {
    let text = "Thread,Time,Action,Pointer,Size,Stream\n\
                1,23:59:59.999999,allocate,0x10,8,0\n\
                1,00:00:00.000001,free,0x10,8,0\n";
    let events = parse_trace(text, "t").unwrap();
    assert_eq!(events[1].time_ns - events[0].time_ns, 2_000);
}

/// A time-of-day trace that passes midnight more often than 64-bit
/// nanoseconds can count (about 213,500 days) is refused at the line where
/// the clock runs out, neither a panic nor a wrapped time.
#[test]
fn csv_times_past_midnight_too_often_are_refused_not_wrapped() {
    const DAYS_IN_U64_NS: usize = (u64::MAX / 86_400_000_000_000) as usize;
    let mut text = String::from("Thread,Time,Action,Pointer,Size,Stream\n");
    for _ in 0..=DAYS_IN_U64_NS {
        text.push_str("1,23:59:59.999999,allocate failure,(nil),8,0\n");
        text.push_str("1,00:00:00.0,allocate failure,(nil),8,0\n");
    }
    let error = parse_trace(&text, "t").unwrap_err().to_string();
    // Pair n (from 0) is lines 2n + 2 and 2n + 3, its second line on day
    // n + 1: the clock runs out before the end of the day that pair
    // DAYS_IN_U64_NS starts on.
    let line = 2 * DAYS_IN_U64_NS + 2;
    assert!(
        error.starts_with(&format!("t:{line}: ")) && error.contains("midnight"),
        "{error}"
    );
}

/// A trace file that cannot be created or written is the operating
/// system's error, with its number, not a bad argument.
#[test]
fn a_trace_file_that_cannot_be_written_is_an_io_error() {
    let error = TraceAdaptor::to_file(
        MallocMemoryResource::new(),
        std::path::Path::new("/dev/full"),
        TraceFormat::Csv,
    )
    .unwrap_err();
    assert!(
        matches!(&error, devmm::Error::Io { errno: Some(28), what, .. } if what == "cannot write the trace header"),
        "{error:?}"
    );
}

/// Lines are numbered as the file's, whatever ends them (`\n`, `\r\n`, the
/// end of the text) and however they are written (as rmm writes them, or
/// padded): blank lines and white space only are passed over, and an
/// error names its line.
#[test]
fn csv_lines_are_numbered_however_they_end() {
    let text = "\n  \nThread,Time,Action,Pointer,Size,Stream\r\n\
                7,10:00:00.000001,allocate,0x1000,64,0\r\n\
                \r\n\
                7,10:00:00.000002,allocate,0x2000,32,0\n\
                \t\n\
                7, 10:00:00.000003 ,free,0x1000,64,0\n\
                \n\
                7,10:00:00.000004,free,0x2000,32,0";
    let events = parse_trace(text, "t.csv").unwrap();
    let lines: Vec<_> = events.iter().map(|e| (e.line, e.ptr, e.action)).collect();
    assert_eq!(
        lines,
        [
            (4, 0x1000, Action::Allocate),
            (6, 0x2000, Action::Allocate),
            (8, 0x1000, Action::Free),
            (10, 0x2000, Action::Free),
        ]
    );
    assert_eq!(events[3].time_ns, 36_000_000_004_000);
    let bad = text.replace("free,0x2000,32,0", "free,0x2000,33,0");
    assert_eq!(
        parse_trace(&bad, "t.csv").unwrap_err().to_string(),
        "t.csv:10: free of 0x2000 with 33 bytes, but line 6 allocated 32"
    );
    let bad = text.replace("0x2000,32,0\n", "0x2000,32,0,\n");
    assert_eq!(
        parse_trace(&bad, "t.csv").unwrap_err().to_string(),
        "t.csv:6: expected 6 comma-separated fields (Thread,Time,Action,Pointer,Size,Stream), found 7"
    );
}

/// A trace with several faults names the same one however it is read: an
/// unreadable line first, then a clock that ran out, then an allocation
/// or free the lines before it contradict, each the first of its kind,
/// wherever they lie.
#[test]
fn of_several_faults_the_same_one_is_named() {
    const DAYS_IN_U64_NS: usize = (u64::MAX / 86_400_000_000_000) as usize;
    let mut text = String::from("Thread,Time,Action,Pointer,Size,Stream\n");
    text.push_str("1,00:00:00.0,free,0x10,8,0\n");
    text.push_str("1,00:00:00.0,free,0x20,8,0\n");
    for _ in 0..=DAYS_IN_U64_NS {
        text.push_str("1,23:59:59.999999,allocate failure,(nil),8,0\n");
        text.push_str("1,00:00:00.0,allocate failure,(nil),8,0\n");
    }
    let clock_line = 2 * DAYS_IN_U64_NS + 4;
    let error = |text: &str| parse_trace(text, "t").unwrap_err().to_string();
    let found = error(&text);
    assert!(
        found.starts_with(&format!("t:{clock_line}: the time of day went back")),
        "{found}"
    );
    let unreadable = format!("{text}1,00:00:00.0,free,0x10\n");
    assert!(
        error(&unreadable).starts_with(&format!("t:{}: expected 6", clock_line + 2)),
        "{}",
        error(&unreadable)
    );
    let short = "Thread,Time,Action,Pointer,Size,Stream\n\
                 1,00:00:00.0,free,0x10,8,0\n\
                 1,00:00:00.0,free,0x20,8,0\n";
    assert_eq!(
        error(short),
        "t:2: free of 0x10, which no earlier line allocated"
    );
}
