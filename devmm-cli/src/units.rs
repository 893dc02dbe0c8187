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
}
