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
    // `devmm replay` reads millions of lines: the fields are found and
    // trimmed in place, without a vector or a scan for Unicode spaces per
    // field (issue 34: the parse was 72% of a replay).
    let [thread, time, action, ptr, nbytes, stream] = split_fields(line.trim_end_matches('\r'))
        .map_err(|found| format!("expected 6 comma-separated fields ({HEADER}), found {found}"))?;
    let thread = trim(thread)
        .parse()
        .map_err(|_| format!("Thread {thread:?} is not a thread id"))?;
    let action = Action::parse(trim(action)).ok_or_else(|| {
        format!("Action {action:?} is not one of allocate, allocate failure, free")
    })?;
    Ok(TraceEvent {
        line: 0,
        thread,
        time_ns: parse_time(trim(time))?,
        action,
        ptr: parse_hex(trim(ptr)).ok_or_else(|| format!("Pointer {ptr:?} is not an address"))?,
        nbytes: trim(nbytes)
            .parse()
            .map_err(|_| format!("Size {nbytes:?} is not a byte count"))?,
        stream: parse_hex(trim(stream))
            .ok_or_else(|| format!("Stream {stream:?} is not a stream handle"))?,
        device: None,
        frames: Vec::new(),
    })
}

/// The six comma-separated fields of `line`, or how many it has. Each
/// comma is found by a plain byte loop: `str::split` searches with
/// `memchr`, whose set-up costs more than a short field's bytes.
fn split_fields(line: &str) -> Result<[&str; 6], usize> {
    let mut fields = [""; 6];
    let mut rest = line;
    for (index, field) in fields.iter_mut().take(5).enumerate() {
        let Some(comma) = position(rest, b',') else {
            return Err(index + 1);
        };
        *field = &rest[..comma];
        rest = &rest[comma + 1..];
    }
    if position(rest, b',').is_some() {
        return Err(6 + rest.bytes().filter(|&b| b == b',').count());
    }
    fields[5] = rest;
    Ok(fields)
}

/// Where the ASCII byte `byte` first is in `text`: a character boundary,
/// so `text` can be cut there.
fn position(text: &str, byte: u8) -> Option<usize> {
    text.bytes().position(|b| b == byte)
}

/// `field` without surrounding white space; the usual field (printable
/// ASCII at both ends) is returned as is, without `str::trim`'s Unicode
/// checks.
fn trim(field: &str) -> &str {
    let bytes = field.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) if first.is_ascii_graphic() && last.is_ascii_graphic() => field,
        _ => field.trim(),
    }
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
    let (clock, fraction) = match position(text, b'.') {
        Some(dot) => (&text[..dot], &text[dot + 1..]),
        None => (text, ""),
    };
    // The first and the last colon: a third colon leaves one in the
    // minutes, which then do not parse.
    let (Some(first), Some(last)) = (
        position(clock, b':'),
        clock.bytes().rposition(|b| b == b':'),
    ) else {
        return Err(bad());
    };
    if last == first {
        return Err(bad());
    }
    let (h, m, s) = (&clock[..first], &clock[first + 1..last], &clock[last + 1..]);
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

    /// The in-place field splitting and trimming read what `split` and
    /// `trim` read: padded fields, CRLF endings, and field counts named.
    #[test]
    fn fields_are_split_and_trimmed_as_before() {
        let padded = parse_line(" 7 ,\t10:00:00.5 , free ,0x10 , 64 ,0\r").unwrap();
        assert_eq!(
            (padded.thread, padded.action, padded.ptr, padded.nbytes),
            (7, Action::Free, 0x10, 64)
        );
        assert_eq!(padded.time_ns, 36_000 * NS_PER_S + 500_000_000);
        for (line, found) in [
            ("", 1),
            ("1,2,3", 3),
            ("1,00:00:00.0,free,0x1,1", 5),
            ("1,00:00:00.0,free,0x1,1,0,", 7),
            ("1,00:00:00.0,free,0x1,1,0,9,9", 8),
        ] {
            let error = parse_line(line).unwrap_err();
            assert!(
                error.ends_with(&format!("found {found}")),
                "{line:?}: {error}"
            );
        }
        for time in ["10:00", "10:00:00:00", "10::00.0", "10:00:00.", "1:2:3"] {
            let line = format!("1,{time},free,0x1,1,0");
            let parsed = parse_line(&line);
            let expect_ok = time == "1:2:3" || time == "10:00:00.";
            assert_eq!(parsed.is_ok(), expect_ok, "{time}: {parsed:?}");
        }
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
