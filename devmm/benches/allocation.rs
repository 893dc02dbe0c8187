//! What an allocation costs through devmm, against the allocator beneath it.
//!
//! Each group measures devmm side by side with the raw calls it wraps, so
//! the figures read as ratios (`python3 scripts/bench_ratios.py` prints
//! them from criterion's estimates; `docs/benchmarks.md` records them):
//!
//! - `alloc_dealloc/64B`, `alloc_dealloc/1MiB`: one allocate + deallocate
//!   pair. Floors: `posix_memalign`/`free` and `std::alloc`. Target: the
//!   two-adaptor stack within 1.5× of `posix_memalign` at 64 B.
//! - `empty_2d`: `empty(&[8, 8], float32)` end to end (registry, layout,
//!   buffer, tensor) and its drop, against one raw pair of the same size.
//!   Target: within 4×.

use std::alloc::Layout as AllocLayout;
use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use devmm::{
    empty, DType, EmptyOptions, HeapMemoryResource, LimitingAdaptor, MallocMemoryResource,
    MemoryResource, StatisticsAdaptor, Stream,
};

/// The alignment every contender uses: the CPU resources' default.
const ALIGN: usize = 64;

fn raw_posix_memalign(nbytes: usize) {
    let mut out: *mut libc::c_void = std::ptr::null_mut();
    // SAFETY: `out` is a valid place for the result and ALIGN is a power of
    // two multiple of the pointer size.
    let status = unsafe { libc::posix_memalign(&mut out, ALIGN, black_box(nbytes)) };
    assert_eq!(status, 0, "posix_memalign({nbytes}) failed");
    // SAFETY: `out` came from posix_memalign and is freed once.
    unsafe { libc::free(black_box(out)) };
}

fn raw_std_alloc(layout: AllocLayout) {
    // SAFETY: every layout measured has a non-zero size.
    let p = unsafe { std::alloc::alloc(black_box(layout)) };
    assert!(!p.is_null(), "std::alloc failed for {layout:?}");
    // SAFETY: `p` came from `alloc(layout)` and is freed once.
    unsafe { std::alloc::dealloc(black_box(p), layout) };
}

fn resource_pair(mr: &dyn MemoryResource, nbytes: usize, stream: &Stream) {
    let p = mr.allocate(black_box(nbytes), stream).expect("allocate");
    // SAFETY: `p` came from `mr.allocate(nbytes, ..)` and is freed once.
    unsafe { mr.deallocate(black_box(p), nbytes, stream) }.expect("deallocate");
}

/// The resource stacks measured, as the registry would hold them.
fn stacks() -> Vec<(&'static str, Arc<dyn MemoryResource>)> {
    vec![
        (
            "MallocMemoryResource",
            Arc::new(MallocMemoryResource::new()),
        ),
        ("HeapMemoryResource", Arc::new(HeapMemoryResource::new())),
        (
            "Statistics(Limiting(Malloc))",
            Arc::new(StatisticsAdaptor::new(LimitingAdaptor::new(
                MallocMemoryResource::new(),
                usize::MAX,
            ))),
        ),
    ]
}

fn alloc_dealloc(c: &mut Criterion) {
    let stream = Stream::cpu();
    for (label, nbytes) in [("64B", 64usize), ("1MiB", 1 << 20)] {
        let mut group = c.benchmark_group(format!("alloc_dealloc/{label}"));
        group.bench_function("posix_memalign+free", |b| {
            b.iter(|| raw_posix_memalign(nbytes))
        });
        let layout = AllocLayout::from_size_align(nbytes, ALIGN).expect("valid layout");
        group.bench_function("std::alloc+dealloc", |b| b.iter(|| raw_std_alloc(layout)));
        for (name, mr) in stacks() {
            group.bench_with_input(BenchmarkId::from_parameter(name), &mr, |b, mr| {
                b.iter(|| resource_pair(&**mr, nbytes, &stream))
            });
        }
        group.finish();
    }
}

fn empty_2d(c: &mut Criterion) {
    let shape = [8usize, 8];
    let nbytes = shape.iter().product::<usize>() * DType::FLOAT32.itemsize();
    let options = EmptyOptions::new();
    let mut group = c.benchmark_group("empty_2d");
    group.bench_function("posix_memalign+free", |b| {
        b.iter(|| raw_posix_memalign(nbytes))
    });
    group.bench_function("empty+drop", |b| {
        b.iter(|| {
            drop(black_box(
                empty(black_box(&shape), DType::FLOAT32, &options).expect("empty"),
            ))
        })
    });
    group.finish();
}

criterion_group!(benches, alloc_dealloc, empty_2d);
criterion_main!(benches);
