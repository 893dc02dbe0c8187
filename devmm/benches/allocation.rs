//! What an allocation costs through devmm, in time, against the allocator
//! beneath it. `instructions.rs` counts instructions for the same
//! workloads; `docs/benchmarks.md` records both as ratios.
//!
//! - `alloc_dealloc/64B`, `alloc_dealloc/1MiB`: one allocate + deallocate
//!   pair. Floors: `posix_memalign`/`free` and `std::alloc`. Target: the
//!   two-adaptor stack within 1.5× of `posix_memalign` at 64 B.
//! - `empty_2d`: `empty(&[8, 8], float32)` end to end (registry, layout,
//!   buffer, tensor) and its drop, against one raw pair of the same size.
//!   Target: within 4×.
//! - `dlpack_export`: `Tensor::to_dlpack` for that tensor plus the
//!   consumer's deleter, against one raw pair of a 64-byte block (an export
//!   is one heap block). Target: under 2×.
//! - `driver_call`: `cudaGetDeviceCount` of the fake CUDA runtime
//!   (`tests/fake-cudart`) through `CudaRuntime::device_count` (generated
//!   table and result layer) against the same symbol called directly.
//!   Target: no measurable difference.

mod workloads;

use criterion::{Criterion, criterion_main};

fn side_by_side(c: &mut Criterion) {
    let workloads = workloads::all();
    let mut groups: Vec<&'static str> = workloads.iter().map(|w| w.group).collect();
    groups.dedup();
    for group in groups {
        // Built together before any is measured, as `instructions` does.
        let mut built: Vec<(&str, workloads::Run)> = workloads
            .iter()
            .filter(|w| w.group == group)
            .map(|w| (w.name, (w.make)()))
            .collect();
        let mut measured = c.benchmark_group(group);
        for (name, run) in &mut built {
            measured.bench_function(*name, |b| b.iter(&mut *run));
        }
        measured.finish();
    }
}

// `criterion_group!` defines a public function it cannot document.
#[allow(missing_docs)]
mod group {
    criterion::criterion_group!(benches, super::side_by_side);
}
use group::benches;

criterion_main!(benches);
