//! rmm's `logging_resource_adaptor` CSV: `Thread,Time,Action,Pointer,Size,Stream`,
//! the time as `HH:MM:SS.ffffff` (time of day, UTC here), pointers as
//! `printf("%p")` writes them (`0x7f..`, `(nil)`), streams in hex.

use super::{Action, TraceEvent};

/// The header line rmm writes first.
pub(super) const HEADER: &str = "Thread,Time,Action,Pointer,Size,Stream";

const NS_PER_S: u64 = 1_000_000_000;

pub(super) fn format_line(e: &TraceEvent) -> String {
    let of_day = e.time_ns % (86_400 * NS_PER_S);
    let seconds = of_day / NS_PER_S;
    let micros = (of_day % NS_PER_S) / 1_000;
    let (h, m, s) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    let ptr = if e.ptr == 0 {
        "(nil)".to_owned()
    } else {
        format!("{:#x}", e.ptr)
    };
    // rmm streams out the handle with `std::hex`: `0` for the default stream.
    let stream = if e.stream == 0 {
        "0".to_owned()
    } else {
        format!("{:#x}", e.stream)
    };
    format!(
        "{},{h:02}:{m:02}:{s:02}.{micros:06},{},{ptr},{},{stream}\n",
        e.thread,
        e.action.as_str(),
        e.nbytes
    )
}

pub(super) fn parse_line(line: &str) -> Result<TraceEvent, String> {
    let fields: Vec<&str> = line.trim_end_matches('\r').split(',').collect();
    let [thread, time, action, ptr, nbytes, stream] = fields[..] else {
        return Err(format!(
            "expected 6 comma-separated fields ({HEADER}), found {}",
            fields.len()
        ));
    };
    let thread = thread
        .trim()
        .parse()
        .map_err(|_| format!("Thread {thread:?} is not a thread id"))?;
    let action = Action::parse(action.trim()).ok_or_else(|| {
        format!("Action {action:?} is not one of allocate, allocate failure, free")
    })?;
    Ok(TraceEvent {
        line: 0,
        thread,
        time_ns: parse_time(time.trim())?,
        action,
        ptr: parse_hex(ptr.trim()).ok_or_else(|| format!("Pointer {ptr:?} is not an address"))?,
        nbytes: nbytes
            .trim()
            .parse()
            .map_err(|_| format!("Size {nbytes:?} is not a byte count"))?,
        stream: parse_hex(stream.trim())
            .ok_or_else(|| format!("Stream {stream:?} is not a stream handle"))?,
        device: None,
        frames: Vec::new(),
    })
}

/// `0x1f`, `1f`, `0` or `(nil)`.
fn parse_hex(text: &str) -> Option<usize> {
    if text == "(nil)" {
        return Some(0);
    }
    let digits = text.strip_prefix("0x").unwrap_or(text);
    usize::from_str_radix(digits, 16).ok()
}

/// `HH:MM:SS.ffffff` (any number of fraction digits) to nanoseconds.
fn parse_time(text: &str) -> Result<u64, String> {
    let bad = || format!("Time {text:?} is not HH:MM:SS.ffffff");
    let (clock, fraction) = text.split_once('.').unwrap_or((text, ""));
    let parts: Vec<&str> = clock.split(':').collect();
    let [h, m, s] = parts[..] else {
        return Err(bad());
    };
    let number = |t: &str, max: u64| t.parse::<u64>().ok().filter(|v| *v < max);
    let (Some(h), Some(m), Some(s)) = (number(h, 24), number(m, 60), number(s, 61)) else {
        return Err(bad());
    };
    if fraction.len() > 9 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let fraction_ns = if fraction.is_empty() {
        0
    } else {
        let scale = 10u64.pow(9 - fraction.len() as u32);
        fraction.parse::<u64>().map_err(|_| bad())? * scale
    };
    Ok(((h * 60 + m) * 60 + s) * NS_PER_S + fraction_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip() {
        let event = TraceEvent {
            line: 0,
            thread: 140_573_312_345_856,
            time_ns: (10 * 3600 + 15 * 60 + 1) * NS_PER_S + 123_456_000,
            action: Action::Allocate,
            ptr: 0x7f8a_4000_0000,
            nbytes: 1024,
            stream: 0x7f8a_3800_1020,
            device: None,
            frames: Vec::new(),
        };
        let line = format_line(&event);
        assert_eq!(
            line,
            "140573312345856,10:15:01.123456,allocate,0x7f8a40000000,1024,0x7f8a38001020\n"
        );
        assert_eq!(parse_line(line.trim_end()), Ok(event));
    }

    #[test]
    fn failures_write_a_nil_pointer() {
        let line = "3,00:00:00.5,allocate failure,(nil),99,0";
        let event = parse_line(line).unwrap();
        assert_eq!(
            (event.action, event.ptr, event.time_ns),
            (Action::AllocateFailure, 0, 500_000_000)
        );
        assert_eq!(
            format_line(&event),
            "3,00:00:00.500000,allocate failure,(nil),99,0\n"
        );
    }

    #[test]
    fn bad_fields_are_named() {
        assert!(
            parse_line("1,2,3")
                .unwrap_err()
                .contains("6 comma-separated")
        );
        assert!(
            parse_line("1,25:00:00.0,free,0x1,1,0")
                .unwrap_err()
                .contains("Time")
        );
        assert!(
            parse_line("1,00:00:00.0,release,0x1,1,0")
                .unwrap_err()
                .contains("Action")
        );
        assert!(
            parse_line("1,00:00:00.0,free,zz,1,0")
                .unwrap_err()
                .contains("Pointer")
        );
        assert!(
            parse_line("1,00:00:00.0,free,0x1,-1,0")
                .unwrap_err()
                .contains("Size")
        );
        assert!(
            parse_line("x,00:00:00.0,free,0x1,1,0")
                .unwrap_err()
                .contains("Thread")
        );
    }
}
