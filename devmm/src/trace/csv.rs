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
    // The usual line, as rmm writes it, in one pass over its bytes; any
    // other (padding, `+` signs, `(nil)`, long numbers, errors) is read
    // by the general parser below, which alone words the errors.
    match parse_plain_line(line.as_bytes()) {
        Some((event, read)) if read == line.len() => Ok(event),
        _ => parse_any_line(line),
    }
}

/// The event of the line `text` starts with, and the bytes to its next
/// line (its `\n` included), when that line is as rmm writes it (see
/// [`parse_plain_line`]); `None` for any other line, which the caller then
/// cuts out and reads with [`parse_line`]. Reading the line as it is found
/// spares a search for its end (issue 34: a fifth of the parse).
pub(super) fn parse_plain_prefix(text: &str) -> Option<(TraceEvent, usize)> {
    parse_plain_line(text.as_bytes())
}

/// Any line [`parse_line`] reads, and the error for one it does not.
fn parse_any_line(line: &str) -> Result<TraceEvent, String> {
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

/// A line exactly as rmm's logger writes it, read in one pass over its
/// bytes (issue 34: the general parser below was half of a replay's
/// instructions): decimal thread id, `H:M:S` with one or two digits each
/// and up to nine of fraction, `allocate`, `allocate failure` or `free`,
/// `0x` and hex digits, a decimal size, `0` or `0x` and hex digits, with
/// no white space. `None` for anything else, which [`parse_line`]'s general
/// parser then reads (or refuses) as before: this accepts only lines that
/// parser reads, and reads them alike (tested below). The line ends at a
/// `\n` or at the end of `line`; the bytes read are returned, the `\n`
/// included.
fn parse_plain_line(line: &[u8]) -> Option<(TraceEvent, usize)> {
    let mut scan = Scan { bytes: line, at: 0 };
    let thread = scan.decimal(19)?;
    scan.expect(b',')?;
    let h = scan.decimal(2).filter(|&h| h < 24)?;
    scan.expect(b':')?;
    let m = scan.decimal(2).filter(|&m| m < 60)?;
    scan.expect(b':')?;
    let s = scan.decimal(2).filter(|&s| s < 61)?;
    let mut fraction_ns = 0;
    if scan.peek() == Some(b'.') {
        scan.at += 1;
        let start = scan.at;
        let fraction = scan.digits(9);
        if scan.peek().is_some_and(|b| b.is_ascii_digit()) {
            return None;
        }
        fraction_ns = fraction * POWERS_OF_TEN[9 - (scan.at - start)];
    }
    scan.expect(b',')?;
    let rest = &line[scan.at..];
    let action = if rest.starts_with(b"allocate,") {
        scan.at += 9;
        Action::Allocate
    } else if rest.starts_with(b"free,") {
        scan.at += 5;
        Action::Free
    } else if rest.starts_with(b"allocate failure,") {
        scan.at += 17;
        Action::AllocateFailure
    } else {
        return None;
    };
    scan.expect(b'0')?;
    scan.expect(b'x')?;
    let ptr = scan.hex()?;
    scan.expect(b',')?;
    let nbytes = usize::try_from(scan.decimal(19)?).ok()?;
    scan.expect(b',')?;
    scan.expect(b'0')?;
    let stream = match scan.peek() {
        Some(b'x') => {
            scan.at += 1;
            scan.hex()?
        }
        // A lone `0`: anything after it but the line's end is refused below.
        _ => 0,
    };
    let read = match scan.peek() {
        None => scan.at,
        Some(b'\n') => scan.at + 1,
        Some(_) => return None,
    };
    let event = TraceEvent {
        line: 0,
        thread,
        time_ns: ((h * 60 + m) * 60 + s) * NS_PER_S + fraction_ns,
        action,
        ptr,
        nbytes,
        stream,
        device: None,
        frames: Vec::new(),
    };
    Some((event, read))
}

/// `10^n` for the scale of `n` missing fraction digits.
const POWERS_OF_TEN: [u64; 10] = {
    let mut powers = [1u64; 10];
    let mut n = 1;
    while n < 10 {
        powers[n] = powers[n - 1] * 10;
        n += 1;
    }
    powers
};

/// Each byte's value as a hex digit, or [`NOT_HEX`].
const HEX_DIGITS: [u8; 256] = {
    let mut digits = [NOT_HEX; 256];
    let mut byte = 0;
    while byte < 256 {
        digits[byte] = match byte as u8 {
            b @ b'0'..=b'9' => b - b'0',
            b @ b'a'..=b'f' => b - b'a' + 10,
            b @ b'A'..=b'F' => b - b'A' + 10,
            _ => NOT_HEX,
        };
        byte += 1;
    }
    digits
};
const NOT_HEX: u8 = 0xff;

/// A cursor over a line's bytes for [`parse_plain_line`].
struct Scan<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Scan<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        if self.peek() != Some(byte) {
            return None;
        }
        self.at += 1;
        Some(())
    }

    /// Up to `max` decimal digits (none is 0); stops at the first other byte.
    fn digits(&mut self, max: usize) -> u64 {
        let mut value = 0u64;
        let end = self.bytes.len().min(self.at + max);
        while self.at < end {
            let digit = self.bytes[self.at].wrapping_sub(b'0');
            if digit > 9 {
                break;
            }
            value = value * 10 + u64::from(digit);
            self.at += 1;
        }
        value
    }

    /// One to `max` decimal digits (at most 19, which cannot overflow) not
    /// followed by another digit.
    fn decimal(&mut self, max: usize) -> Option<u64> {
        let start = self.at;
        let value = self.digits(max);
        let more = self.peek().is_some_and(|b| b.is_ascii_digit());
        (self.at > start && !more).then_some(value)
    }

    /// One to 16 hex digits (either case) not followed by another.
    fn hex(&mut self) -> Option<usize> {
        let (start, mut value) = (self.at, 0u64);
        // One digit past 16 is read to be refused.
        let end = self.bytes.len().min(start + 17);
        while self.at < end {
            let digit = HEX_DIGITS[usize::from(self.bytes[self.at])];
            if digit == NOT_HEX {
                break;
            }
            value = (value << 4) | u64::from(digit);
            self.at += 1;
        }
        if self.at == start || self.at - start > 16 {
            return None;
        }
        usize::try_from(value).ok()
    }
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

    /// The one-pass reader of rmm's usual lines reads what the general
    /// parser reads, and leaves it every other line: checked over lines
    /// like rmm's and every line one byte away from them (a byte deleted,
    /// replaced or inserted, from bytes that matter to some field).
    #[test]
    fn plain_lines_are_read_as_the_general_parser_reads_them() {
        let lines = [
            "140573312345856,10:15:01.123456,allocate,0x7f8a40000000,1024,0x7f8a38001020",
            "140573312345856,23:59:60.999999999,free,0xFFFFFFFFFFFFFFFF,9999999999999999999,0",
            "7,1:2:3,allocate failure,0x0,99,0x0",
            "18446744073709551615,00:00:00.,free,0x1,0,0",
            "9999999999999999999,09:09:09.1,allocate,0x00000000000000001,1,0",
            "3,00:00:00.5,allocate failure,(nil),99,0",
        ];
        let bytes: &[u8] = b" \t\r+-0159afAFxX,.:(n";
        let mut variants = Vec::new();
        for line in lines {
            let line = line.as_bytes();
            variants.push(line.to_vec());
            for at in 0..=line.len() {
                if at < line.len() {
                    variants.push([&line[..at], &line[at + 1..]].concat());
                }
                for &byte in bytes {
                    variants.push([&line[..at], &[byte], &line[at..]].concat());
                    if at < line.len() {
                        variants.push([&line[..at], &[byte], &line[at + 1..]].concat());
                    }
                }
            }
        }
        let mut plain = 0;
        for variant in &variants {
            let text = std::str::from_utf8(variant).unwrap();
            if let Some((event, read)) = parse_plain_line(variant) {
                assert_eq!(read, variant.len(), "{text:?}");
                plain += 1;
                assert_eq!(parse_any_line(text), Ok(event), "{text:?}");
            }
        }
        // The lines as rmm writes them take the one-pass reader.
        for line in &lines[..3] {
            assert!(parse_plain_line(line.as_bytes()).is_some(), "{line:?}");
        }
        assert!(
            plain > 1000,
            "{plain} of {} read in one pass",
            variants.len()
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
