//! Memory per live tensor (issue 34's Rust row), beside its anchor.
//!
//! Each workload runs in a process of its own, keeps `LIVE` objects alive
//! and reports how much its resident set grew, per object: every byte a
//! live tensor costs (the data block, the buffer and tensor records, the
//! allocator's headers and alignment padding), which no count of
//! requested bytes shows. The anchor is the tensor's data alone, one
//! `posix_memalign` block of the same size and alignment.
//!
//! `cargo bench -p devmm --bench memory` prints a Markdown table with the
//! sizes of the records involved; under `cargo test --benches` every
//! workload runs once, with a few objects.

use std::hint::black_box;
use std::process::{Command, ExitCode};

use devmm::{DType, DeviceBuffer, EmptyOptions, Layout, Tensor, empty};

/// Objects kept alive per measurement: enough that the allocator's
/// start-up and the page granularity are noise.
const LIVE: usize = 200_000;

/// The argument that makes this binary the measured child process.
const CHILD: &str = "--run-workload";

/// What each workload keeps alive, named for the table.
const WORKLOADS: &[&str] = &[
    "the data block alone: posix_memalign(64, 24)",
    "empty(&[2, 3], FLOAT32) (Rust)",
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, index, n] = args.as_slice()
        && flag == CHILD
    {
        let (Ok(index), Ok(n)) = (index.parse::<usize>(), n.parse::<usize>()) else {
            eprintln!("memory: {CHILD} takes a workload index and a count");
            return ExitCode::FAILURE;
        };
        println!("{}", bytes_per_object(index, n));
        return ExitCode::SUCCESS;
    }
    let bench = args.iter().any(|a| a == "--bench");
    let live = if bench { LIVE } else { 100 };
    let mut rows = Vec::new();
    for (index, name) in WORKLOADS.iter().enumerate() {
        let out = Command::new(std::env::current_exe().expect("the bench's own path"))
            .args([CHILD, &index.to_string(), &live.to_string()])
            .output()
            .expect("the workload's process runs");
        if !out.status.success() {
            eprintln!(
                "memory: workload {name} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            return ExitCode::FAILURE;
        }
        let per: f64 = String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or(f64::NAN);
        rows.push((name, per));
    }
    if !bench {
        for (name, _) in &rows {
            println!("Testing memory/{name}: Success");
        }
        return ExitCode::SUCCESS;
    }
    println!("| live object | resident bytes each | × the data block |");
    println!("| --- | ---: | ---: |");
    let anchor = rows[0].1;
    for (name, per) in &rows {
        println!("| {name} | {per:.0} | {:.2} |", per / anchor);
    }
    println!();
    println!(
        "records: Tensor {} B (a pointer to its shared record), DeviceBuffer {} B, Layout {} B",
        size_of::<Tensor>(),
        size_of::<DeviceBuffer>(),
        size_of::<Layout>()
    );
    ExitCode::SUCCESS
}

/// Resident set growth per object while `n` objects of workload `index`
/// are alive.
fn bytes_per_object(index: usize, n: usize) -> f64 {
    // The holder is sized up front and one object of each kind made and
    // dropped first, so neither the vector's growth nor lazy start-up is
    // counted.
    match index {
        0 => {
            let mut held: Vec<*mut libc::c_void> = Vec::with_capacity(n);
            drop_raw(raw_block());
            let before = resident_bytes();
            held.extend((0..n).map(|_| raw_block()));
            let grown = resident_bytes() - before;
            held.into_iter().for_each(drop_raw);
            grown as f64 / n as f64
        }
        _ => {
            let mut held: Vec<Tensor> = Vec::with_capacity(n);
            drop(tensor());
            let before = resident_bytes();
            held.extend((0..n).map(|_| tensor()));
            let grown = resident_bytes() - before;
            drop(black_box(held));
            grown as f64 / n as f64
        }
    }
}

fn tensor() -> Tensor {
    empty(&[2, 3], DType::FLOAT32, &EmptyOptions::new()).expect("a small CPU tensor")
}

fn raw_block() -> *mut libc::c_void {
    let mut out = std::ptr::null_mut();
    // SAFETY: a valid out-pointer; 64 is a power of two and a multiple of
    // the pointer size.
    let status = unsafe { libc::posix_memalign(&mut out, 64, black_box(24)) };
    assert_eq!(status, 0, "posix_memalign(64, 24) failed");
    out
}

fn drop_raw(block: *mut libc::c_void) {
    // SAFETY: `block` came from posix_memalign and is freed once.
    unsafe { libc::free(block) }
}

/// The process's resident set in bytes (`/proc/self/statm`).
fn resident_bytes() -> isize {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: isize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("resident pages");
    // SAFETY: sysconf has no preconditions.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as isize
}
