//! Byte counts and durations written the way people read them.

/// `1536` → `"1.5 KiB"`; exact powers print without decimals (`"64 MiB"`).
pub(crate) fn bytes(n: usize) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut unit = 0;
    let mut whole = n;
    while whole >= 1024 && unit + 1 < UNITS.len() {
        whole /= 1024;
        unit += 1;
    }
    // Precision loss past 2^53 bytes is far below the one decimal printed.
    #[allow(clippy::cast_precision_loss)]
    let scaled = n as f64 / 1024f64.powi(unit as i32);
    if scaled.fract() == 0.0 {
        format!("{scaled:.0} {}", UNITS[unit])
    } else {
        format!("{scaled:.1} {}", UNITS[unit])
    }
}

/// Nanoseconds with three significant figures in the unit that fits:
/// `"23.4 ns"`, `"1.20 µs"`, `"15.0 ms"`.
pub(crate) fn nanos(ns: f64) -> String {
    nanos_in_unit_of(ns, ns)
}

/// `ns` in the unit [`nanos`] would choose for `scale`, so every tick of an
/// axis reads in one unit: `nanos_in_unit_of(0.0, 15.0e6)` is `"0.00 ms"`,
/// not `"0.00 ns"`.
pub(crate) fn nanos_in_unit_of(ns: f64, scale: f64) -> String {
    let (divisor, unit) = if scale < 1e3 {
        (1.0, "ns")
    } else if scale < 1e6 {
        (1e3, "µs")
    } else if scale < 1e9 {
        (1e6, "ms")
    } else {
        (1e9, "s")
    };
    let value = ns / divisor;
    let decimals = if value < 10.0 {
        2
    } else if value < 100.0 {
        1
    } else {
        0
    };
    format!("{value:.decimals$} {unit}")
}

/// Parses a byte count: a whole number with an optional binary unit
/// (`64`, `64B`, `4KiB`, `64MiB`, `1GiB`; the unit is case-insensitive).
pub(crate) fn parse_bytes(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "kib" | "k" => 10,
        "mib" | "m" => 20,
        "gib" | "g" => 30,
        _ => {
            return Err(format!(
                "unknown unit {unit:?} in {text:?}; use B, KiB, MiB or GiB"
            ))
        }
    };
    let n: usize = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a byte count such as 4096 or 64MiB"))?;
    n.checked_mul(1usize << shift)
        .ok_or_else(|| format!("{text:?} does not fit in usize"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_pick_the_largest_whole_unit() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(64), "64 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1024), "1 KiB");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(64 << 20), "64 MiB");
        assert_eq!(bytes(usize::MAX), "16384 PiB");
    }

    #[test]
    fn nanos_keep_three_significant_figures() {
        assert_eq!(nanos(5.0), "5.00 ns");
        assert_eq!(nanos(23.44), "23.4 ns");
        assert_eq!(nanos(999.0), "999 ns");
        assert_eq!(nanos(1200.0), "1.20 µs");
        assert_eq!(nanos(15.0e6), "15.0 ms");
        assert_eq!(nanos(2.5e9), "2.50 s");
    }

    #[test]
    fn an_axis_reads_every_tick_in_the_unit_of_its_largest() {
        assert_eq!(nanos_in_unit_of(0.0, 15.0e6), "0.00 ms");
        assert_eq!(nanos_in_unit_of(3.0e6, 15.0e6), "3.00 ms");
        assert_eq!(nanos_in_unit_of(15.0e6, 15.0e6), "15.0 ms");
        assert_eq!(nanos_in_unit_of(400.0, 2.0e3), "0.40 µs");
    }

    #[test]
    fn byte_counts_parse_with_binary_units() {
        assert_eq!(parse_bytes("64"), Ok(64));
        assert_eq!(parse_bytes("64B"), Ok(64));
        assert_eq!(parse_bytes("4KiB"), Ok(4096));
        assert_eq!(parse_bytes("64 MiB"), Ok(64 << 20));
        assert_eq!(parse_bytes("1g"), Ok(1 << 30));
        assert!(parse_bytes("4TB").unwrap_err().contains("unknown unit"));
        assert!(parse_bytes("MiB").unwrap_err().contains("not a byte count"));
        assert!(parse_bytes("99999999999999999999GiB").is_err());
        assert!(parse_bytes("17179869184GiB")
            .unwrap_err()
            .contains("does not fit"));
    }
}
