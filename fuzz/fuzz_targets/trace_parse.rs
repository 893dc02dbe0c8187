//! The trace readers (rmm's CSV and devmm's JSON lines, told apart by the
//! first line) over any text: a trace is refused with its line named, or
//! read, and then it digests into a timeline and a PyTorch snapshot and
//! reads back the same from what devmm writes for it; never a panic or
//! an overflow (the fuzz build checks arithmetic).
#![no_main]

use devmm::trace::{
    Timeline, TraceFormat, format_event, header, parse_trace, torch_snapshot_of_trace,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let events = match parse_trace(text, "fuzz") {
        Ok(events) => events,
        Err(error) => {
            assert!(error.to_string().starts_with("fuzz:"), "{error}");
            return;
        }
    };
    Timeline::of(&events);
    torch_snapshot_of_trace(&events);
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let format = match first.trim_start().starts_with('{') {
        true => TraceFormat::JsonLines,
        false => TraceFormat::Csv,
    };
    let mut written = header(format).map_or_else(String::new, |h| format!("{h}\n"));
    for event in &events {
        written.push_str(&format_event(format, event));
    }
    let again = parse_trace(&written, "written").expect("what devmm writes reads back");
    assert_eq!(again.len(), events.len());
    for (read, reread) in events.iter().zip(&again) {
        // The CSV keeps the time of day to the microsecond: compared apart.
        let same_but_time = (read.thread, read.action, read.ptr, read.nbytes, read.stream)
            == (reread.thread, reread.action, reread.ptr, reread.nbytes, reread.stream);
        assert!(same_but_time, "{read:?} wrote and read back as {reread:?}");
        if format == TraceFormat::JsonLines {
            assert_eq!((read.time_ns, &read.device, &read.frames), (reread.time_ns, &reread.device, &reread.frames));
        }
    }
});
