//! The logging adaptor's structured events, alone in its own test binary:
//! tracing keeps its callsites' interest and its maximum level process-wide,
//! and a test on another thread of the same process that registers a
//! callsite or a subscriber while this one logs can recompute them without
//! this test's thread-local subscriber, dropping an event (seen about once
//! in 80 runs when it shared a binary with the other adaptor tests).

use std::sync::{Arc, Mutex};

use devmm::{LoggingAdaptor, MallocMemoryResource, MemoryResource, Stream};

/// Collects the formatted `devmm::mr` events.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn logging_emits_structured_events() {
    let capture = Capture::default();
    let writer = capture.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::TRACE)
        .finish();
    let mr = LoggingAdaptor::new(MallocMemoryResource::new());
    let stream = Stream::cpu();
    let ptr = tracing::subscriber::with_default(subscriber, || {
        let p = mr.allocate(48, &stream).unwrap();
        // SAFETY: allocated just above with 48 bytes.
        unsafe { mr.deallocate(p, 48, &stream).unwrap() };
        let _ = mr.allocate(usize::MAX / 2, &stream);
        p
    });
    let text = String::from_utf8(capture.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    let ptr_field = format!("ptr={}", ptr.addr());
    for (line, op) in lines.iter().zip(["allocate", "deallocate", "allocate"]) {
        assert!(line.contains("devmm::mr"), "{line}");
        assert!(line.contains(&format!("op=\"{op}\"")), "{line}");
        assert!(
            line.contains("stream=0") && line.contains("device=cpu:0"),
            "{line}"
        );
    }
    assert!(
        lines[0].contains("INFO")
            && lines[0].contains(&ptr_field)
            && lines[0].contains("nbytes=48")
    );
    assert!(lines[1].contains(&ptr_field) && lines[1].contains("nbytes=48"));
    assert!(
        lines[2].contains("WARN") && lines[2].contains("error=out of memory"),
        "{}",
        lines[2]
    );
}
