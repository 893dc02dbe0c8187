//! `devmm replay` of a 1e6-event rmm CSV beside its anchor: the same
//! events replayed by a plain `posix_memalign`/`free` loop (issue 34).
//!
//! Both read the same file and start from its text. The anchor does the
//! least any replay must: it splits each line for its action, pointer and
//! size, keeps the recorded pointer's replacement in a `HashMap` (std's,
//! as a plain program would) and calls `posix_memalign(64)` / `free`.
//! `devmm replay FILE` (the default stack: the CPU's default resource
//! under the replay's statistics adaptor) also checks the trace (every
//! free matches a live allocation of its size, times settle past
//! midnight), computes the recorded peak, plans the recorded threads and
//! reports.
//!
//! `cargo bench -p devmm-cli --bench replay` prints events per second of
//! each, interleaved (anchor, replay, anchor, …; the best of `ROUNDS`
//! each), then instructions per event of each under callgrind (each run
//! in its own process, the process's start-up subtracted: a run that only
//! reads the file). `-- --no-callgrind` skips the second. Under `cargo
//! test --benches` both run once on a small trace.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

/// Events in the measured trace.
const EVENTS: usize = 1_000_000;
/// Interleaved timing rounds; each figure is the best round.
const ROUNDS: usize = 5;
/// The argument that makes this binary the measured child process.
const CHILD: &str = "--run-child";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, what, path] = args.as_slice() {
        if flag != CHILD {
            eprintln!("replay bench: {flag} is not {CHILD}");
            return ExitCode::FAILURE;
        }
        return match run_once(what, Path::new(path)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("replay bench: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let measuring = args.iter().any(|a| a == "--bench");
    let events = if measuring { EVENTS } else { 1_000 };
    let result = (|| -> Result<(), String> {
        let path = write_trace(events)?;
        if !measuring {
            run_once("anchor", &path)?;
            run_once("replay", &path)?;
            println!("Testing replay/anchor, replay/devmm: Success");
            return Ok(());
        }
        let mut report = timings(&path, events)?;
        if !args.iter().any(|a| a == "--no-callgrind") {
            report.push_str(&instructions(&path, events)?);
        }
        print!("{report}");
        Ok(())
    })();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("replay bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Writes a trace of `events` lines (after the header) as rmm's
/// `logging_resource_adaptor` would: one recorded thread, allocations of
/// 16 B to 16 KiB with up to 1,000 live, every one freed by the end.
fn write_trace(events: usize) -> Result<PathBuf, String> {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("replay-{events}.csv"));
    if path.exists() {
        return Ok(path);
    }
    let mut text = String::from("Thread,Time,Action,Pointer,Size,Stream\n");
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        // xorshift64: deterministic, so every run replays the same trace.
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut live: Vec<(usize, usize)> = Vec::new();
    let mut address = 0x7f8a_4000_0000usize;
    for n in 0..events {
        let micros = 36_000_000_000u64 + n as u64;
        let (s, us) = (micros / 1_000_000, micros % 1_000_000);
        let time = format!("{:02}:{:02}:{:02}.{us:06}", s / 3600, s / 60 % 60, s % 60);
        let remaining = events - n;
        let allocate =
            live.len() < remaining && (live.is_empty() || (live.len() < 1_000 && next() % 2 == 0));
        if allocate {
            let nbytes = 16usize << (next() % 11);
            address += 0x10_000;
            live.push((address, nbytes));
            let _ = writeln!(
                text,
                "140573312345856,{time},allocate,{address:#x},{nbytes},0"
            );
        } else {
            let at = (next() % live.len() as u64) as usize;
            let (ptr, nbytes) = live.swap_remove(at);
            let _ = writeln!(text, "140573312345856,{time},free,{ptr:#x},{nbytes},0");
        }
    }
    std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

/// One run of `what` over the trace in `path`: `anchor`, `replay` or
/// `read` (the file only: the start-up the instruction counts subtract).
fn run_once(what: &str, path: &Path) -> Result<(), String> {
    match what {
        "anchor" => anchor(path).map(drop),
        "replay" => {
            let status = devmm_cli::run_status(["devmm", "replay", &path.to_string_lossy()]);
            match status {
                0 => Ok(()),
                s => Err(format!("devmm replay exited with {s}")),
            }
        }
        "read" => std::fs::read_to_string(path)
            .map(drop)
            .map_err(|e| e.to_string()),
        other => Err(format!("no run named {other}")),
    }
}

/// The anchor: the trace's allocations and frees as `posix_memalign(64)`
/// and `free`; returns how many events it replayed.
fn anchor(path: &Path) -> Result<usize, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let mut live: HashMap<usize, *mut libc::c_void> = HashMap::new();
    let mut events = 0;
    for line in text.lines().skip(1) {
        let mut fields = line.split(',');
        let (Some(action), Some(ptr), Some(nbytes)) = (fields.nth(2), fields.next(), fields.next())
        else {
            return Err(format!("not an rmm line: {line}"));
        };
        let ptr = usize::from_str_radix(ptr.trim_start_matches("0x"), 16)
            .map_err(|_| format!("bad pointer in {line}"))?;
        let nbytes: usize = nbytes.parse().map_err(|_| format!("bad size in {line}"))?;
        match action {
            "allocate" => {
                let mut out = std::ptr::null_mut();
                // SAFETY: `out` is a valid place for the result; 64 is a
                // power of two and a multiple of the pointer size.
                if unsafe { libc::posix_memalign(&mut out, 64, nbytes) } != 0 {
                    return Err(format!("posix_memalign({nbytes}) failed"));
                }
                live.insert(ptr, out);
            }
            "free" => {
                let out = live
                    .remove(&ptr)
                    .ok_or_else(|| format!("free of {ptr:#x} before its allocation"))?;
                // SAFETY: `out` came from posix_memalign above and is freed once.
                unsafe { libc::free(out) };
            }
            _ => {}
        }
        events += 1;
    }
    Ok(events)
}

/// Events per second of the anchor and of `devmm replay`, interleaved.
fn timings(path: &Path, events: usize) -> Result<String, String> {
    let (mut anchor_best, mut replay_best) = (f64::MAX, f64::MAX);
    for _ in 0..ROUNDS {
        let start = Instant::now();
        run_once("anchor", path)?;
        anchor_best = anchor_best.min(start.elapsed().as_secs_f64());
        let start = Instant::now();
        run_once("replay", path)?;
        replay_best = replay_best.min(start.elapsed().as_secs_f64());
    }
    let rate = |secs: f64| events as f64 / secs / 1e6;
    Ok(format!(
        "| run | M events/s (best of {ROUNDS}, interleaved) | × anchor |\n| --- | ---: | ---: |\n\
         | posix_memalign+free loop (anchor) | {:.2} | 1.00 |\n\
         | devmm replay | {:.2} | {:.2} |\n",
        rate(anchor_best),
        rate(replay_best),
        anchor_best / replay_best
    ))
}

/// Instructions per event of each, under callgrind.
fn instructions(path: &Path, events: usize) -> Result<String, String> {
    let read = collected("read", path)?;
    let anchor = collected("anchor", path)?.saturating_sub(read) as f64 / events as f64;
    let replay = collected("replay", path)?.saturating_sub(read) as f64 / events as f64;
    Ok(format!(
        "\n| run | instructions / event | × anchor (throughput) |\n| --- | ---: | ---: |\n\
         | posix_memalign+free loop (anchor) | {anchor:.0} | 1.00 |\n\
         | devmm replay | {replay:.0} | {:.2} |\n",
        anchor / replay
    ))
}

/// Instructions callgrind counted for this binary running `what` once.
fn collected(what: &str, path: &Path) -> Result<u64, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let out = Command::new("valgrind")
        .args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
        .arg(&exe)
        .args([CHILD, what])
        .arg(path)
        .output()
        .map_err(|e| format!("cannot run valgrind ({e}); install it: apt-get install valgrind"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!("{what} failed under valgrind:\n{stderr}"));
    }
    stderr
        .lines()
        .find_map(|line| {
            line.split_once("Collected :")
                .map(|(_, n)| n.trim().to_owned())
        })
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("callgrind printed no instruction count:\n{stderr}"))
}
