//! Instructions per operation, counted by valgrind's callgrind.
//!
//! Timings on a shared machine move with its load; instruction counts do
//! not, so these ratios are the repeatable half of the figures in
//! `docs/benchmarks.md` (criterion's timings in `allocation.rs` are the
//! other half). Each workload runs in its own process under callgrind
//! (which builds the workload's whole group, so all members start from the
//! same allocator state), once with 0 and once with `ITERATIONS` iterations
//! after one warm-up call; the difference divided by `ITERATIONS` is the
//! cost of one iteration, free of start-up and set-up.
//!
//! `cargo bench -p devmm --bench instructions [-- FILTER]` prints a
//! Markdown table (FILTER keeps the groups whose name contains it); under
//! `cargo test --benches` every workload runs once.

mod workloads;

use std::process::{Command, ExitCode};

/// Iterations counted per workload: enough that the warm-up's lazy
/// initialisation is noise, few enough that callgrind takes seconds.
const ITERATIONS: u64 = 20_000;

/// The argument that makes this binary the measured child process.
const CHILD: &str = "--run-workload";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, index, n] = args.as_slice()
        && flag == CHILD
    {
        return run_child(index, n);
    }
    if !args.iter().any(|a| a == "--bench") {
        // `cargo test --benches`: prove every workload runs, as criterion
        // does in test mode, without needing valgrind.
        for w in workloads::all() {
            ((w.make)())();
            println!("Testing {}/{}: Success", w.group, w.name);
        }
        return ExitCode::SUCCESS;
    }
    let filter = args.iter().find(|a| !a.starts_with('-')).cloned();
    match count_all(filter.as_deref()) {
        Ok(table) => {
            print!("{table}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("instructions: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_child(index: &str, n: &str) -> ExitCode {
    let (Ok(index), Ok(n)) = (index.parse::<usize>(), n.parse::<u64>()) else {
        eprintln!("instructions: {CHILD} takes a workload index and an iteration count");
        return ExitCode::FAILURE;
    };
    let all = workloads::all();
    let Some(group) = all.get(index).map(|w| w.group) else {
        eprintln!("instructions: no workload {index}");
        return ExitCode::FAILURE;
    };
    // Build the whole group, in order, whichever member is counted: a raw
    // allocation's cost depends on the allocator's state, which must be
    // the same for the baseline and every contender.
    let mut group: Vec<(usize, workloads::Run)> = all
        .iter()
        .enumerate()
        .filter(|(_, w)| w.group == group)
        .map(|(i, w)| (i, (w.make)()))
        .collect();
    let Some((_, run)) = group.iter_mut().find(|(i, _)| *i == index) else {
        eprintln!("instructions: workload {index} is missing from its own group");
        return ExitCode::FAILURE;
    };
    run();
    for _ in 0..n {
        run();
    }
    ExitCode::SUCCESS
}

/// Instructions callgrind counted for this binary running workload `index`
/// `n` times (plus the warm-up).
fn collected(index: usize, n: u64) -> Result<u64, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let out = Command::new("valgrind")
        .args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
        .arg(&exe)
        .args([CHILD, &index.to_string(), &n.to_string()])
        .output()
        .map_err(|e| format!("cannot run valgrind ({e}); install it: apt-get install valgrind"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!("workload {index} failed under valgrind:\n{stderr}"));
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

fn count_all(filter: Option<&str>) -> Result<String, String> {
    let all = workloads::all();
    let mut table = String::from(
        "| group | workload | instructions / iteration | × group baseline |\n| --- | --- | ---: | ---: |\n",
    );
    let mut baseline: Option<(&str, f64)> = None;
    for (index, w) in all.iter().enumerate() {
        if filter.is_some_and(|f| !w.group.contains(f)) {
            continue;
        }
        let extra = collected(index, ITERATIONS)?.saturating_sub(collected(index, 0)?);
        let per_iteration = extra as f64 / ITERATIONS as f64;
        let base = match baseline {
            Some((group, base)) if group == w.group => base,
            _ => {
                baseline = Some((w.group, per_iteration));
                per_iteration
            }
        };
        table.push_str(&format!(
            "| {} | {} | {per_iteration:.0} | {:.2} |\n",
            w.group,
            w.name,
            per_iteration / base
        ));
    }
    Ok(table)
}
