//! The sweeps of issue #16: what the heap resource's pair costs with many
//! allocations live, what `empty` costs as the rank grows, and a DLPack
//! export against dlpark's own export of the same tensor.
//!
//! Each sweep point is a group of its own with the raw pair as its baseline,
//! so a cliff shows as a step in the instruction column from one group to
//! the next and the ratio column says whether glibc or devmm took it.

use std::hint::black_box;
use std::sync::Arc;

use devmm::{DType, EmptyOptions, HeapMemoryResource, MemoryResource, Stream, empty};
use dlpark::metadata::Dynamic;

use super::{ALIGN, Workload, posix_memalign_pair, resource_pair, workload};

/// The live counts the heap resource is measured at.
const LIVE_COUNTS: [(&str, usize); 4] = [
    ("heap_live/0", 0),
    ("heap_live/1e3", 1_000),
    ("heap_live/1e4", 10_000),
    ("heap_live/1e5", 100_000),
];

/// Shapes of ranks 1 to 8 with the same 64 elements (a 256-byte float32
/// buffer), so the only thing that grows is the rank.
const SHAPES: [&[usize]; 8] = [
    &[64],
    &[8, 8],
    &[4, 4, 4],
    &[4, 4, 2, 2],
    &[4, 2, 2, 2, 2],
    &[2, 2, 2, 2, 2, 2],
    &[2, 2, 2, 2, 2, 2, 1],
    &[2, 2, 2, 2, 2, 2, 1, 1],
];

const NDIM_NAMES: [&str; 8] = [
    "empty+drop, ndim 1",
    "empty+drop, ndim 2",
    "empty+drop, ndim 3",
    "empty+drop, ndim 4",
    "empty+drop, ndim 5",
    "empty+drop, ndim 6",
    "empty+drop, ndim 7",
    "empty+drop, ndim 8",
];

/// The raw 64-byte pair while it holds `live` blocks of 64 bytes from the
/// same `posix_memalign` (freed when the workload is dropped): the floor
/// the heap resource's pair is compared with at the same live count.
fn posix_memalign_pair_with_live(live: usize) -> impl FnMut() {
    struct Held(Vec<*mut libc::c_void>);
    impl Drop for Held {
        fn drop(&mut self) {
            for &p in &self.0 {
                // SAFETY: each came from posix_memalign and is freed once.
                unsafe { libc::free(p) };
            }
        }
    }
    let held = Held(
        (0..live)
            .map(|_| {
                let mut out: *mut libc::c_void = std::ptr::null_mut();
                // SAFETY: `out` is a valid place for the result and the
                // alignment is a power of two multiple of the pointer size.
                let status = unsafe { libc::posix_memalign(&mut out, ALIGN, 64) };
                assert_eq!(status, 0, "posix_memalign(64) failed");
                out
            })
            .collect(),
    );
    let mut pair = posix_memalign_pair(64);
    move || {
        black_box(&held.0);
        pair();
    }
}

/// A 64-byte pair through a heap resource that already holds `live`
/// allocations of 64 bytes (kept live for the whole run).
fn heap_pair_with_live(live: usize) -> impl FnMut() {
    let mr = Arc::new(HeapMemoryResource::new());
    let stream = Stream::cpu();
    let held: Vec<_> = (0..live)
        .map(|_| mr.allocate(64, &stream).expect("allocate"))
        .collect();
    let mut pair = resource_pair(mr, 64);
    move || {
        black_box(&held);
        pair();
    }
}

/// `empty(shape, float32)` with default options, then its drop.
fn empty_of(shape: &'static [usize]) -> impl FnMut() {
    let options = EmptyOptions::new();
    move || {
        let t = empty(black_box(shape), DType::FLOAT32, &options).expect("empty");
        drop(black_box(t));
    }
}

/// dlpark's own export of the same 8 × 8 float32 tensor: one block for
/// the managed struct, shape and strides, an `Arc` of the owner as the
/// context, then the deleter.
fn dlpark_export_2d() -> impl FnMut() {
    let owner = Arc::new(vec![0f32; 64]);
    let shape = [8usize, 8];
    let strides = [8usize, 1];
    move || {
        // SAFETY: the metadata is copied into the allocation, and the data
        // pointer stays valid while the context (an `Arc` of it) lives.
        let prepared = unsafe { Dynamic::new(&shape[..], &strides[..]).prepare_unchecked() }
            .expect("dlpark prepares the metadata");
        let mut initialized = prepared.initialize(Arc::clone(&owner));
        initialized
            .set_data(owner.as_ptr().cast_mut().cast())
            .set_device(dlpark::ffi::DLDevice::CPU)
            .set_dtype(dlpark::ffi::DLDataType {
                code: dlpark::ffi::DLDataTypeCode::FLOAT,
                bits: 32,
                lanes: 1,
            });
        // SAFETY: data, device, dtype, shape and strides describe `owner`.
        let managed = unsafe { initialized.finish() };
        drop(black_box(managed));
    }
}

/// Adds dlpark's export to `group` (the DLPack export group).
pub(super) fn push_dlpark_export(all: &mut Vec<Workload>, group: &'static str) {
    all.push(workload(group, "dlpark export+deleter", dlpark_export_2d));
}

/// The live-count and rank sweeps.
pub(super) fn push(all: &mut Vec<Workload>) {
    for (group, live) in LIVE_COUNTS {
        all.push(workload(group, "posix_memalign+free", || {
            posix_memalign_pair(64)
        }));
        all.push(workload(
            group,
            "posix_memalign+free, same live set",
            move || posix_memalign_pair_with_live(live),
        ));
        all.push(workload(group, "HeapMemoryResource", move || {
            heap_pair_with_live(live)
        }));
    }
    let nbytes = 64 * DType::FLOAT32.itemsize();
    all.push(workload("empty_ndim", "posix_memalign+free", move || {
        posix_memalign_pair(nbytes)
    }));
    for (shape, name) in SHAPES.into_iter().zip(NDIM_NAMES) {
        all.push(workload("empty_ndim", name, move || empty_of(shape)));
    }
}
