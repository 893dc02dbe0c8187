//! The call log and per-function call counters.

use std::collections::HashMap;

#[derive(Debug, Default)]
pub(crate) struct CallLog {
    lines: Vec<String>,
    counts: HashMap<&'static str, u64>,
}

impl CallLog {
    pub(crate) fn count(&mut self, name: &'static str) {
        *self.counts.entry(name).or_default() += 1;
    }

    pub(crate) fn push(&mut self, line: String) {
        self.lines.push(line);
    }

    pub(crate) fn calls(&self, name: &str) -> u64 {
        self.counts.get(name).copied().unwrap_or(0)
    }

    /// The whole log, one call per line, each line ending in `\n`.
    pub(crate) fn text(&self) -> String {
        self.lines
            .iter()
            .flat_map(|line| [line.as_str(), "\n"])
            .collect()
    }

    pub(crate) fn clear(&mut self) {
        *self = Self::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_lines_are_kept_in_order() {
        let mut log = CallLog::default();
        log.count("cudaMalloc");
        log.count("cudaMalloc");
        log.push("cudaMalloc size=1 -> 0".into());
        log.push("cudaFree ptr=0x0 -> 0".into());
        assert_eq!(log.calls("cudaMalloc"), 2);
        assert_eq!(log.calls("cudaFree"), 0);
        assert_eq!(
            log.text(),
            "cudaMalloc size=1 -> 0\ncudaFree ptr=0x0 -> 0\n"
        );
        log.clear();
        assert_eq!((log.calls("cudaMalloc"), log.text()), (0, String::new()));
    }
}
