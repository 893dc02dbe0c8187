//! What a trace says over time: live bytes per device after each event,
//! the peak, and the call sites that allocated the most.

use std::collections::HashMap;

use super::{Action, TraceEvent};
use crate::device::Device;

/// Live bytes just after one event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// Nanoseconds since the trace's first event.
    pub time_ns: u64,
    /// Bytes allocated and not yet freed.
    pub live_bytes: usize,
}

/// One device's curve.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceTimeline {
    /// The device, or `None` for a trace that does not record it (rmm's CSV).
    pub device: Option<Device>,
    /// One sample per allocate or free on the device, in trace order.
    pub samples: Vec<Sample>,
    /// The first sample with the most live bytes.
    pub peak: Sample,
}

/// The bytes one call site allocated over the whole trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteTotal {
    /// The innermost frame, `file:line in function`, or a placeholder for
    /// events recorded without call sites.
    pub site: String,
    /// Successful allocations made there.
    pub allocations: usize,
    /// Bytes they asked for in all.
    pub bytes: usize,
    /// The largest single allocation.
    pub largest: usize,
}

/// The site label of events recorded without a call site.
pub const UNKNOWN_SITE: &str = "(call site not recorded)";

/// A trace digested for plots and reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timeline {
    /// One curve per device, in order of first appearance.
    pub devices: Vec<DeviceTimeline>,
    /// Call sites, most bytes first.
    pub sites: Vec<SiteTotal>,
    /// Allocations the trace records as refused.
    pub failures: usize,
    /// Nanoseconds from the first event to the last.
    pub duration_ns: u64,
    /// The most bytes live at once over all devices together.
    total_peak: usize,
}

impl Timeline {
    /// Digests `events` (as [`parse_trace`](super::parse_trace) returns them).
    pub fn of(events: &[TraceEvent]) -> Timeline {
        let start = events.first().map_or(0, |e| e.time_ns);
        let mut devices: Vec<DeviceTimeline> = Vec::new();
        let mut live: Vec<usize> = Vec::new();
        let mut sites: HashMap<String, SiteTotal> = HashMap::new();
        let mut failures = 0;
        for e in events {
            if e.action == Action::AllocateFailure {
                failures += 1;
                continue;
            }
            let index = match devices.iter().position(|d| d.device == e.device) {
                Some(i) => i,
                None => {
                    devices.push(DeviceTimeline {
                        device: e.device,
                        samples: Vec::new(),
                        peak: Sample {
                            time_ns: e.time_ns.saturating_sub(start),
                            live_bytes: 0,
                        },
                    });
                    live.push(0);
                    devices.len() - 1
                }
            };
            if e.action == Action::Allocate {
                live[index] = live[index].saturating_add(e.nbytes);
                let site = e
                    .frames
                    .first()
                    .map_or_else(|| UNKNOWN_SITE.to_owned(), ToString::to_string);
                let entry = sites.entry(site.clone()).or_insert(SiteTotal {
                    site,
                    allocations: 0,
                    bytes: 0,
                    largest: 0,
                });
                entry.allocations += 1;
                entry.bytes = entry.bytes.saturating_add(e.nbytes);
                entry.largest = entry.largest.max(e.nbytes);
            } else {
                live[index] = live[index].saturating_sub(e.nbytes);
            }
            let sample = Sample {
                time_ns: e.time_ns.saturating_sub(start),
                live_bytes: live[index],
            };
            let curve = &mut devices[index];
            curve.samples.push(sample);
            if sample.live_bytes > curve.peak.live_bytes {
                curve.peak = sample;
            }
        }
        let mut sites: Vec<SiteTotal> = sites.into_values().collect();
        sites.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.site.cmp(&b.site)));
        Timeline {
            devices,
            sites,
            failures,
            duration_ns: events.last().map_or(0, |e| e.time_ns.saturating_sub(start)),
            total_peak: Timeline::peak_bytes_of(events),
        }
    }

    /// The most bytes `events` hold live at once, all devices together:
    /// [`Timeline::of`]`(events).`[`peak_bytes`](Timeline::peak_bytes)`()`
    /// without the curves and call sites (`devmm replay` reports only this).
    ///
    /// ```
    /// use devmm::trace::{parse_trace, Timeline};
    /// let csv = "Thread,Time,Action,Pointer,Size,Stream\n\
    ///            7,10:00:00.000001,allocate,0x1000,64,0\n\
    ///            7,10:00:00.000002,allocate,0x2000,32,0\n\
    ///            7,10:00:00.000003,free,0x1000,64,0\n";
    /// let events = parse_trace(csv, "rmm.csv")?;
    /// assert_eq!(Timeline::peak_bytes_of(&events), 96);
    /// # Ok::<(), devmm::trace::TraceError>(())
    /// ```
    pub fn peak_bytes_of(events: &[TraceEvent]) -> usize {
        let (mut total, mut peak) = (0usize, 0usize);
        for e in events {
            match e.action {
                Action::Allocate => total = total.saturating_add(e.nbytes),
                Action::Free => total = total.saturating_sub(e.nbytes),
                Action::AllocateFailure => {}
            }
            peak = peak.max(total);
        }
        peak
    }

    /// The most bytes live at once, all devices together.
    pub fn peak_bytes(&self) -> usize {
        self.total_peak
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::callsite::Frame;

    fn event(time_ns: u64, action: Action, ptr: usize, nbytes: usize, device: &str) -> TraceEvent {
        TraceEvent {
            line: 0,
            thread: 1,
            time_ns,
            action,
            ptr,
            nbytes,
            stream: 0,
            device: Some(device.parse().unwrap()),
            frames: vec![Frame {
                function: "f".into(),
                file: Some("a.rs".into()),
                line: Some(ptr as u32),
            }],
        }
    }

    #[test]
    fn curves_peaks_and_sites_per_device() {
        let events = [
            event(100, Action::Allocate, 1, 10, "cpu:0"),
            event(200, Action::Allocate, 2, 30, "cuda:0"),
            event(300, Action::Allocate, 3, 5, "cpu:0"),
            event(400, Action::Free, 1, 10, "cpu:0"),
            event(450, Action::AllocateFailure, 0, 99, "cuda:0"),
            event(500, Action::Free, 2, 30, "cuda:0"),
        ];
        let t = Timeline::of(&events);
        assert_eq!(t.devices.len(), 2);
        let cpu = &t.devices[0];
        let live: Vec<usize> = cpu.samples.iter().map(|s| s.live_bytes).collect();
        assert_eq!(live, [10, 15, 5]);
        assert_eq!(
            cpu.peak,
            Sample {
                time_ns: 200,
                live_bytes: 15
            }
        );
        assert_eq!(
            t.devices[1].peak,
            Sample {
                time_ns: 100,
                live_bytes: 30
            }
        );
        assert_eq!(t.peak_bytes(), 45);
        // `devmm replay`'s shortcut agrees with the whole timeline.
        assert_eq!(Timeline::peak_bytes_of(&events), 45);
        assert_eq!((t.failures, t.duration_ns), (1, 400));
        assert_eq!(t.sites[0].site, "a.rs:2 in f");
        assert_eq!((t.sites[0].bytes, t.sites[0].allocations), (30, 1));
    }
}
