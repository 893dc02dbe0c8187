//! `devmm plot` as a person sees it: a real headless Chromium (Debian's
//! `chromium`, which scripts/test.sh installs) renders the HTML, and the
//! screenshot's pixels must show the curve where the trace puts it.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The first curve's colour (plot.rs's palette), as the screenshot has it.
const CURVE: [u8; 3] = [0x1f, 0x77, 0xb4];
/// The plot area in CSS pixels (plot.rs's margins on a 960-wide drawing).
const PLOT_LEFT: f64 = 100.0;
const PLOT_RIGHT: f64 = 920.0;
const PLOT_TOP: f64 = 60.0;
const PLOT_BOTTOM: f64 = 470.0;

/// The trace climbs one block a millisecond to its peak at `PEAK_MS`, then
/// frees one block every 2 ms until `END_MS`.
const BLOCKS: u64 = 30;
const PEAK_MS: f64 = (BLOCKS - 1) as f64;
const END_MS: f64 = (BLOCKS + 2 * (BLOCKS - 1)) as f64;

fn write_trace(path: &Path) {
    let mut text = String::from("Thread,Time,Action,Pointer,Size,Stream\n");
    let mut line = |action: &str, block: u64, ms: u64| {
        let us = ms * 1_000;
        let (s, us) = (us / 1_000_000, us % 1_000_000);
        let ptr = 0x10_0000 * (block + 1);
        text.push_str(&format!(
            "1,10:00:{s:02}.{us:06},{action},{ptr:#x},70000,0\n"
        ));
    };
    for block in 0..BLOCKS {
        line("allocate", block, block);
    }
    for block in 0..BLOCKS {
        line("free", block, BLOCKS + 2 * block);
    }
    std::fs::write(path, text).unwrap();
}

fn chromium() -> String {
    let candidates = ["chromium", "chromium-browser", "google-chrome"];
    for name in candidates {
        if Command::new(name)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return name.to_owned();
        }
    }
    panic!(
        "no headless Chromium on PATH (tried {candidates:?}): `apt-get install -y chromium` \
         (scripts/test.sh does it) to run the browser test of `devmm plot`"
    );
}

/// Runs `command` to completion, killing it and failing the test if it
/// outlives `limit` (a hung browser must not hang the suite). Its output
/// goes to files in `dir`, not pipes: a helper process the browser started
/// could hold a pipe open after the browser is killed.
fn output_within(mut command: Command, limit: Duration, dir: &Path) -> Output {
    let (out_path, err_path) = (dir.join("stdout.txt"), dir.join("stderr.txt"));
    let mut child = command
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!(
                "{:?} did not finish within {limit:?}, so it was killed; its stderr:\n{}",
                command.get_program(),
                String::from_utf8_lossy(&std::fs::read(&err_path).unwrap())
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    Output {
        status,
        stdout: std::fs::read(&out_path).unwrap(),
        stderr: std::fs::read(&err_path).unwrap(),
    }
}

#[test]
fn chromium_draws_the_curve_with_its_peak_where_the_trace_has_it() {
    let dir = tempfile::tempdir().unwrap();
    let (trace, html, shot) = (
        dir.path().join("t.csv"),
        dir.path().join("m.html"),
        dir.path().join("shot.png"),
    );
    write_trace(&trace);
    let out = Command::new(env!("CARGO_BIN_EXE_devmm"))
        .args([
            "plot",
            trace.to_str().unwrap(),
            "-o",
            html.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut status = Command::new(chromium());
    status
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
            "--window-size=1000,800",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.path().join("profile").display()
        ))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", html.display()));
    let status = output_within(status, Duration::from_secs(60), dir.path());
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );

    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut pixels).unwrap();
    let channels = info.color_type.samples();
    let (width, height) = (info.width as usize, info.height as usize);
    assert_eq!((width, height), (1000, 800));

    // Every pixel of the curve's colour (anti-aliasing blends the edges).
    let mut curve = Vec::new();
    for y in 0..height {
        for x in 0..width {
            let p = &pixels[(y * width + x) * channels..][..3];
            if p.iter().zip(CURVE).all(|(a, b)| a.abs_diff(b) <= 12) {
                curve.push((x as f64, y as f64));
            }
        }
    }
    assert!(curve.len() > 500, "only {} curve pixels", curve.len());
    // The legend's swatch shares the colour; it sits above the plot's right end.
    let curve: Vec<(f64, f64)> = curve
        .into_iter()
        .filter(|&(x, y)| {
            x <= PLOT_RIGHT + 2.0 && (PLOT_TOP + 6.0..=PLOT_BOTTOM + 2.0).contains(&y)
        })
        .collect();
    let min_x = curve.iter().map(|p| p.0).fold(f64::MAX, f64::min);
    let max_x = curve.iter().map(|p| p.0).fold(0.0, f64::max);
    assert!(
        min_x <= PLOT_LEFT + 3.0 && max_x >= PLOT_RIGHT - 3.0,
        "spans {min_x}..{max_x}"
    );
    // The highest point is the peak, on a scale whose top is 1.15 times it.
    let top = curve.iter().map(|p| p.1).fold(f64::MAX, f64::min);
    let expected_top = PLOT_BOTTOM - (PLOT_BOTTOM - PLOT_TOP) / 1.15;
    assert!(
        (top - expected_top).abs() <= 3.0,
        "top at y={top}, expected {expected_top}"
    );
    let at_top: Vec<f64> = curve
        .iter()
        .filter(|p| p.1 <= top + 1.0)
        .map(|p| p.0)
        .collect();
    let peak_x = PLOT_LEFT + (PEAK_MS / END_MS) * (PLOT_RIGHT - PLOT_LEFT);
    let first_top = at_top.iter().copied().fold(f64::MAX, f64::min);
    assert!(
        (first_top - peak_x).abs() <= 4.0,
        "the peak starts at x={first_top}, expected {peak_x}"
    );
    // Left of the peak the curve climbs: its height halfway there is about half.
    let half_x = (PLOT_LEFT + peak_x) / 2.0;
    let column: Vec<f64> = curve
        .iter()
        .filter(|p| (p.0 - half_x).abs() < 1.0)
        .map(|p| p.1)
        .collect();
    assert!(!column.is_empty(), "no curve at x={half_x}");
    let y = column.iter().copied().fold(f64::MAX, f64::min);
    let height_fraction = (PLOT_BOTTOM - y) / (PLOT_BOTTOM - top);
    assert!(
        (0.4..0.6).contains(&height_fraction),
        "climbed {height_fraction} of the way by halfway"
    );
}
