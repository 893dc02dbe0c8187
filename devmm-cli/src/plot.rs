//! `devmm plot`: live bytes over time from a trace, one curve per device
//! with its peak marked, and the call sites that allocated the most, as one
//! self-contained SVG or HTML file (no scripts, fonts or network).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use devmm::trace::{read_trace, DeviceTimeline, Timeline};

use crate::error::CliError;
use crate::units;

/// Options of `devmm plot`.
#[derive(Debug, clap::Args)]
pub(crate) struct PlotArgs {
    /// The trace: rmm's CSV or devmm's JSON lines.
    trace: PathBuf,
    /// The file to write; its extension picks the format: .html or .svg.
    #[arg(short, long, default_value = "memory.html")]
    output: PathBuf,
    /// The title over the plot (default: the trace's file name).
    #[arg(long)]
    title: Option<String>,
    /// How many of the largest allocation sites to list.
    #[arg(long, default_value_t = 8)]
    sites: usize,
}

/// The curve colours, one per device in order of appearance. The first is
/// the one the browser test looks for.
pub(crate) const PALETTE: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
];

const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 540.0;
const LEFT: f64 = 100.0;
const RIGHT: f64 = 40.0;
const TOP: f64 = 60.0;
const BOTTOM: f64 = 70.0;
const SITE_LINE: f64 = 22.0;

/// Curves longer than this are drawn from per-pixel maxima and final
/// values, so a trace of millions of events stays a small file and every
/// peak stays visible.
const MAX_POINTS: usize = 4000;

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

struct Frame {
    t_max: f64,
    v_max: f64,
}

impl Frame {
    fn x(&self, t_ns: u64) -> f64 {
        LEFT + (t_ns as f64 / self.t_max) * (WIDTH - LEFT - RIGHT)
    }
    fn y(&self, bytes: usize) -> f64 {
        HEIGHT - BOTTOM - (bytes as f64 / self.v_max) * (HEIGHT - TOP - BOTTOM)
    }
}

/// The step path of one curve, starting from nothing at time 0.
fn path(curve: &DeviceTimeline, frame: &Frame) -> String {
    let mut d = format!("M{:.1} {:.1}", frame.x(0), frame.y(0));
    let samples = &curve.samples;
    if samples.len() <= MAX_POINTS {
        for s in samples {
            let _ = write!(d, "H{:.1}V{:.1}", frame.x(s.time_ns), frame.y(s.live_bytes));
        }
        return d;
    }
    // One column per pixel: up to its highest value, down to its last.
    let mut column = f64::NAN;
    let (mut high, mut last) = (0usize, 0usize);
    for s in samples {
        let x = frame.x(s.time_ns).floor();
        if x != column && !column.is_nan() {
            let _ = write!(d, "H{column:.1}V{:.1}V{:.1}", frame.y(high), frame.y(last));
            high = last;
        }
        column = x;
        high = high.max(s.live_bytes);
        last = s.live_bytes;
    }
    let _ = write!(d, "H{column:.1}V{:.1}V{:.1}", frame.y(high), frame.y(last));
    d
}

/// The plot as an SVG document.
pub(crate) fn svg(timeline: &Timeline, title: &str, site_count: usize) -> String {
    let peak = timeline
        .devices
        .iter()
        .map(|d| d.peak.live_bytes)
        .max()
        .unwrap_or(0);
    let frame = Frame {
        t_max: timeline.duration_ns.max(1) as f64,
        v_max: (peak.max(1) as f64) * 1.15,
    };
    let sites = &timeline.sites[..timeline.sites.len().min(site_count)];
    let total_height = HEIGHT + 40.0 + SITE_LINE * (sites.len() as f64 + 1.0);
    let mut out = String::new();
    let _ = write!(
        out,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{total_height}" viewBox="0 0 {WIDTH} {total_height}" font-family="sans-serif" font-size="13">
<rect width="100%" height="100%" fill="#ffffff"/>
<text x="{LEFT}" y="30" font-size="18" font-weight="bold">{}</text>
"##,
        escape(title)
    );
    // Axes, ticks and grid.
    let (x0, x1, y0, y1) = (LEFT, WIDTH - RIGHT, HEIGHT - BOTTOM, TOP);
    let _ = writeln!(
        out,
        r##"<path d="M{x0} {y1}V{y0}H{x1}" fill="none" stroke="#333333" stroke-width="1"/>"##
    );
    for i in 0..=5u32 {
        let bytes = (frame.v_max * f64::from(i) / 5.0) as usize;
        let y = frame.y(bytes);
        let _ = writeln!(
            out,
            r##"<line x1="{x0}" x2="{x1}" y1="{y:.1}" y2="{y:.1}" stroke="#e6e6e6"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            x0 - 8.0,
            y + 4.0,
            units::bytes(bytes)
        );
        let t = (frame.t_max * f64::from(i) / 5.0) as u64;
        let x = frame.x(t);
        let _ = writeln!(
            out,
            r##"<text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            y0 + 20.0,
            // Every tick in the last tick's unit: "0.00 ms", not "0.00 ns".
            units::nanos_in_unit_of(t as f64, frame.t_max)
        );
    }
    let _ = writeln!(
        out,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle">time since the first event</text>"##,
        (x0 + x1) / 2.0,
        y0 + 45.0
    );
    // Curves, peaks, legend.
    for (i, curve) in timeline.devices.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let name = curve
            .device
            .map_or_else(|| "device not recorded".to_owned(), |d| d.to_string());
        let _ = writeln!(
            out,
            r##"<path class="curve" d="{}" fill="none" stroke="{colour}" stroke-width="2.5"/>"##,
            path(curve, &frame)
        );
        let (px, py) = (frame.x(curve.peak.time_ns), frame.y(curve.peak.live_bytes));
        let anchor = if px > (x0 + x1) / 2.0 { "end" } else { "start" };
        let dx = if anchor == "end" { -10.0 } else { 10.0 };
        let _ = writeln!(
            out,
            r##"<circle class="peak" cx="{px:.1}" cy="{py:.1}" r="6" fill="none" stroke="#000000" stroke-width="2"/><text x="{:.1}" y="{:.1}" text-anchor="{anchor}" font-weight="bold">peak {} at {}</text>"##,
            px + dx,
            py - 8.0,
            units::bytes(curve.peak.live_bytes),
            units::nanos(curve.peak.time_ns as f64)
        );
        let ly = TOP + 18.0 * i as f64;
        let _ = writeln!(
            out,
            r##"<rect x="{:.1}" y="{:.1}" width="14" height="4" fill="{colour}"/><text x="{:.1}" y="{:.1}">{}</text>"##,
            x1 - 150.0,
            ly - 4.0,
            x1 - 130.0,
            ly + 1.0,
            escape(&name)
        );
    }
    // The largest allocation sites.
    let mut y = HEIGHT + 30.0;
    let _ = writeln!(
        out,
        r##"<text x="{LEFT}" y="{y}" font-weight="bold">Largest allocation sites (bytes allocated over the trace)</text>"##
    );
    for site in sites {
        y += SITE_LINE;
        let _ = writeln!(
            out,
            r##"<text x="{LEFT}" y="{y}">{:>10}  in {} allocation(s), largest {}: {}</text>"##,
            units::bytes(site.bytes),
            site.allocations,
            units::bytes(site.largest),
            escape(&site.site)
        );
    }
    out.push_str("</svg>\n");
    out
}

/// The plot as a self-contained HTML page: the SVG inline and a summary.
pub(crate) fn html(timeline: &Timeline, title: &str, site_count: usize) -> String {
    let mut summary = String::new();
    for curve in &timeline.devices {
        let name = curve
            .device
            .map_or_else(|| "device not recorded".to_owned(), |d| d.to_string());
        let _ = write!(
            summary,
            "<li>{}: peak {} at {}, {} events</li>",
            escape(&name),
            units::bytes(curve.peak.live_bytes),
            units::nanos(curve.peak.time_ns as f64),
            curve.samples.len()
        );
    }
    if timeline.failures > 0 {
        let _ = write!(
            summary,
            "<li>{} allocation(s) failed</li>",
            timeline.failures
        );
    }
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n\
         <style>body {{ margin: 0; background: #ffffff; font-family: sans-serif; }} ul {{ margin: 0 100px; }}</style>\n\
         </head>\n<body>\n{}<ul>{summary}</ul>\n</body>\n</html>\n",
        escape(title),
        svg(timeline, title, site_count)
    )
}

/// Runs `devmm plot`.
pub(crate) fn run(args: &PlotArgs) -> Result<ExitCode, CliError> {
    let events = read_trace(&args.trace)?;
    let timeline = Timeline::of(&events);
    let title = args.title.clone().unwrap_or_else(|| {
        let name = args.trace.file_name().map_or_else(
            || args.trace.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        format!("devmm: live bytes over time in {name}")
    });
    let extension = args
        .output
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("");
    let document = match extension.to_ascii_lowercase().as_str() {
        "html" | "htm" => html(&timeline, &title, args.sites),
        "svg" => svg(&timeline, &title, args.sites),
        other => {
            return Err(devmm::Error::InvalidArgument {
                reason: format!(
                    "cannot write a plot as {:?} ({}): name an .html or .svg output \
                     (a browser's screenshot of either makes a PNG)",
                    other,
                    args.output.display()
                ),
            }
            .into());
        }
    };
    write_file(&args.output, &document)?;
    eprintln!("devmm: wrote {}", args.output.display());
    Ok(ExitCode::SUCCESS)
}

fn write_file(path: &Path, text: &str) -> Result<(), CliError> {
    std::fs::write(path, text).map_err(|e| {
        CliError::from(devmm::Error::InvalidArgument {
            reason: format!("cannot write {}: {e}", path.display()),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use devmm::trace::parse_trace;

    fn trace(lines: &[&str]) -> Timeline {
        let text = format!(
            "Thread,Time,Action,Pointer,Size,Stream\n{}\n",
            lines.join("\n")
        );
        Timeline::of(&parse_trace(&text, "t").unwrap())
    }

    #[test]
    fn the_svg_has_a_curve_a_peak_and_escaped_text() {
        let t = trace(&[
            "1,00:00:00.000000,allocate,0x10,1024,0",
            "1,00:00:00.000500,allocate,0x20,3072,0",
            "1,00:00:00.001000,free,0x10,1024,0",
        ]);
        let svg = svg(&t, "a <b>", 8);
        assert!(svg.contains("a &lt;b&gt;"));
        assert_eq!(svg.matches("class=\"curve\"").count(), 1);
        assert!(svg.contains("peak 4 KiB at 500 µs"), "{svg}");
        assert!(
            !svg.contains("http://") || svg.matches("http://").count() == 1,
            "only the SVG namespace"
        );
    }

    #[test]
    fn long_curves_keep_their_peak_when_thinned() {
        let mut lines = Vec::new();
        for i in 0..10_000usize {
            let time = format!("00:00:{:02}.{:06}", i / 1_000_000, i % 1_000_000);
            lines.push(format!("1,{time},allocate,{:#x},8,0", 0x1000 + i * 8));
        }
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let t = trace(&refs);
        let curve = &t.devices[0];
        let frame = Frame {
            t_max: t.duration_ns as f64,
            v_max: 80_000.0,
        };
        let d = path(curve, &frame);
        assert!(d.len() < 10_000 * 8, "thinned: {} bytes", d.len());
        assert!(
            d.contains(&format!("V{:.1}", frame.y(80_000))),
            "the peak is drawn"
        );
    }
}
