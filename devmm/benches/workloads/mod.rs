//! The operations the benchmarks measure, shared by the criterion timings
//! (`allocation.rs`) and the instruction counts (`instructions.rs`) so both
//! measure exactly the same code.
//!
//! Workloads come in groups; the first of each group is its baseline, the
//! raw call devmm wraps, and every figure is read as a ratio to it.

#[path = "../../tests/support/fake_driver.rs"]
mod fake_driver;
mod sweeps;

use std::alloc::Layout as AllocLayout;
use std::ffi::c_int;
use std::hint::black_box;
use std::sync::Arc;

use devmm::dlpack::DlpackRequest;
use devmm::runtime::cuda::CudaRuntime;
use devmm::trace::TraceFormat;
use devmm::{
    Checked, DType, DeviceOptimal, EmptyOptions, HeapMemoryResource, LimitingAdaptor,
    MallocMemoryResource, MemoryResource, StatisticsAdaptor, Stream, TraceAdaptor, TrackingAdaptor,
    empty,
};

/// The alignment of the raw baseline: the CPU resources' default.
const ALIGN: usize = devmm::mrs::cpu::CPU_DEFAULT_ALIGNMENT;

/// The small 2-D shape `empty` is measured with (8 × 8 float32, 256 bytes).
const SHAPE_2D: [usize; 2] = [8, 8];

/// One iteration of a built workload.
pub(crate) type Run = Box<dyn FnMut()>;

/// One measured operation, built on demand: the benches build one group at
/// a time, so the allocator state a group starts from does not depend on
/// the other groups.
pub(crate) struct Workload {
    /// The group it is compared within (`alloc_dealloc/64B`).
    pub(crate) group: &'static str,
    /// Its name inside the group.
    pub(crate) name: &'static str,
    /// Sets the workload up and returns one iteration.
    pub(crate) make: Box<dyn Fn() -> Run>,
}

fn posix_memalign_pair(nbytes: usize) -> impl FnMut() {
    move || {
        let mut out: *mut libc::c_void = std::ptr::null_mut();
        // SAFETY: `out` is a valid place for the result and ALIGN is a power
        // of two multiple of the pointer size.
        let status = unsafe { libc::posix_memalign(&mut out, ALIGN, black_box(nbytes)) };
        assert_eq!(status, 0, "posix_memalign({nbytes}) failed");
        // SAFETY: `out` came from posix_memalign and is freed once.
        unsafe { libc::free(black_box(out)) };
    }
}

fn std_alloc_pair(nbytes: usize) -> impl FnMut() {
    let layout = AllocLayout::from_size_align(nbytes, ALIGN).expect("a valid layout");
    move || {
        // SAFETY: every layout measured has a non-zero size.
        let p = unsafe { std::alloc::alloc(black_box(layout)) };
        assert!(!p.is_null(), "std::alloc failed for {layout:?}");
        // SAFETY: `p` came from `alloc(layout)` and is freed once.
        unsafe { std::alloc::dealloc(black_box(p), layout) };
    }
}

/// An allocate + deallocate pair through `mr`, held as the registry holds
/// resources: behind `Arc<dyn MemoryResource>`.
fn resource_pair(mr: Arc<dyn MemoryResource>, nbytes: usize) -> impl FnMut() {
    let stream = Stream::cpu();
    move || {
        let p = mr.allocate(black_box(nbytes), &stream).expect("allocate");
        // SAFETY: `p` came from `mr.allocate(nbytes, ..)` and is freed once.
        unsafe { mr.deallocate(black_box(p), nbytes, &stream) }.expect("deallocate");
    }
}

fn workload<R: FnMut() + 'static>(
    group: &'static str,
    name: &'static str,
    make: impl Fn() -> R + 'static,
) -> Workload {
    Workload {
        group,
        name,
        make: Box::new(move || Box::new(make())),
    }
}

fn stack() -> Arc<dyn MemoryResource> {
    Arc::new(StatisticsAdaptor::new(LimitingAdaptor::new(
        MallocMemoryResource::new(),
        usize::MAX,
    )))
}

/// `MallocMemoryResource` as the registry hands out a default resource.
fn dyn_malloc() -> Arc<dyn MemoryResource> {
    Arc::new(MallocMemoryResource::new())
}

/// `empty(&SHAPE_2D, float32)` with `options`, then its drop.
fn empty_2d_with(options: EmptyOptions) -> impl FnMut() {
    move || {
        let t = empty(black_box(&SHAPE_2D), DType::FLOAT32, &options).expect("empty");
        drop(black_box(t));
    }
}

/// A versioned export of a small tensor, then its deleter.
fn export_2d() -> impl FnMut() {
    let tensor = empty(&SHAPE_2D, DType::FLOAT32, &EmptyOptions::new()).expect("empty");
    let request = DlpackRequest::new().max_version(1, 1);
    move || {
        let export = tensor.to_dlpack(black_box(&request)).expect("export");
        drop(black_box(export));
    }
}

/// `cudaRuntimeGetVersion` and `cudaDriverGetVersion` of the fake CUDA
/// runtime, resolved and called directly. (Not `cudaGetDeviceCount`: the
/// runtime reads that once, at load, so it no longer reaches the table.)
fn direct_driver_call() -> impl FnMut() {
    type GetVersion = unsafe extern "C" fn(*mut c_int) -> c_int;
    let path = &fake_driver::fake_libraries().cudart;
    let library = fake_driver::FakeControl::open(path).library();
    // SAFETY: the fake exports both with CUDA's signature, and FakeControl
    // keeps the library loaded for the whole process.
    let (runtime, driver) = unsafe {
        (
            *library
                .get::<GetVersion>(b"cudaRuntimeGetVersion\0")
                .expect("the fake exports cudaRuntimeGetVersion"),
            *library
                .get::<GetVersion>(b"cudaDriverGetVersion\0")
                .expect("the fake exports cudaDriverGetVersion"),
        )
    };
    move || {
        let (mut runtime_version, mut driver_version): (c_int, c_int) = (0, 0);
        // SAFETY: both are valid out-parameters for their calls.
        let statuses = unsafe {
            (
                runtime(black_box(&mut runtime_version)),
                driver(black_box(&mut driver_version)),
            )
        };
        assert_eq!(statuses, (0, 0), "the version calls failed");
        black_box((runtime_version, driver_version));
    }
}

/// The same calls through the generated table and the result layer.
fn table_driver_call() -> impl FnMut() {
    let runtime = CudaRuntime::open(&fake_driver::fake_libraries().cudart)
        .expect("the fake CUDA runtime loads");
    move || {
        black_box(runtime.versions().expect("versions"));
    }
}

/// Every workload, baselines first within each group.
pub(crate) fn all() -> Vec<Workload> {
    let mut all = Vec::new();
    for (group, nbytes) in [
        ("alloc_dealloc/64B", 64usize),
        ("alloc_dealloc/1MiB", 1 << 20),
    ] {
        all.push(workload(group, "posix_memalign+free", move || {
            posix_memalign_pair(nbytes)
        }));
        all.push(workload(group, "std::alloc+dealloc", move || {
            std_alloc_pair(nbytes)
        }));
        all.push(workload(group, "MallocMemoryResource", move || {
            resource_pair(Arc::new(MallocMemoryResource::new()), nbytes)
        }));
        all.push(workload(group, "HeapMemoryResource", move || {
            resource_pair(Arc::new(HeapMemoryResource::new()), nbytes)
        }));
        // What every resource Python makes is: the ledger's own cost.
        all.push(workload(group, "Checked(Malloc)", move || {
            resource_pair(Arc::new(Checked::new(MallocMemoryResource::new())), nbytes)
        }));
        all.push(workload(group, "Statistics(Limiting(Malloc))", move || {
            resource_pair(stack(), nbytes)
        }));
    }
    // What each counting adaptor adds, layer by layer (docs/adr/0020): the
    // sharded statistics adaptor alone, and with the limiting adaptor.
    let group = "statistics/64B";
    all.push(workload(group, "posix_memalign+free", || {
        posix_memalign_pair(64)
    }));
    all.push(workload(group, "MallocMemoryResource", || {
        resource_pair(Arc::new(MallocMemoryResource::new()), 64)
    }));
    all.push(workload(group, "Limiting(Malloc)", || {
        resource_pair(
            Arc::new(LimitingAdaptor::new(
                MallocMemoryResource::new(),
                usize::MAX,
            )),
            64,
        )
    }));
    all.push(workload(group, "Statistics(Malloc)", || {
        resource_pair(
            Arc::new(StatisticsAdaptor::new(MallocMemoryResource::new())),
            64,
        )
    }));
    all.push(workload(group, "Statistics(Limiting(Malloc))", || {
        resource_pair(stack(), 64)
    }));
    // The stacks `devmm bench` times (its counted rows wrap the registry's
    // default resource, an `Arc<dyn MemoryResource>`, so the upstream is a
    // second virtual call): the instruction counts behind its ratios.
    let group = "statistics_dyn/64B";
    all.push(workload(group, "posix_memalign+free", || {
        posix_memalign_pair(64)
    }));
    all.push(workload(group, "MallocMemoryResource", || {
        resource_pair(Arc::new(MallocMemoryResource::new()), 64)
    }));
    all.push(workload(group, "Statistics(dyn Malloc)", || {
        resource_pair(Arc::new(StatisticsAdaptor::new(dyn_malloc())), 64)
    }));
    all.push(workload(group, "Statistics(Limiting(dyn Malloc))", || {
        let limited = LimitingAdaptor::new(dyn_malloc(), usize::MAX);
        resource_pair(Arc::new(StatisticsAdaptor::new(limited)), 64)
    }));
    // What watching memory costs: a 64-byte pair through the tracking
    // adaptor (no call site, 8 frames, the default 32) and through
    // the trace adaptor writing rmm's CSV (to a sink, so the figure is
    // devmm's work and not the disk's).
    let group = "observability/64B";
    all.push(workload(group, "posix_memalign+free", || {
        posix_memalign_pair(64)
    }));
    all.push(workload(group, "MallocMemoryResource", || {
        resource_pair(Arc::new(MallocMemoryResource::new()), 64)
    }));
    all.push(workload(group, "Tracking(Malloc), depth 0", || {
        resource_pair(
            Arc::new(TrackingAdaptor::with_depth(MallocMemoryResource::new(), 0)),
            64,
        )
    }));
    all.push(workload(group, "Tracking(Malloc), depth 8", || {
        resource_pair(
            Arc::new(TrackingAdaptor::with_depth(MallocMemoryResource::new(), 8)),
            64,
        )
    }));
    all.push(workload(group, "Tracking(Malloc), depth 32", || {
        resource_pair(
            Arc::new(TrackingAdaptor::new(MallocMemoryResource::new())),
            64,
        )
    }));
    all.push(workload(group, "Trace(Malloc), rmm CSV", || {
        let mr = TraceAdaptor::new(
            MallocMemoryResource::new(),
            std::io::sink(),
            TraceFormat::Csv,
        )
        .expect("a sink takes the header");
        resource_pair(Arc::new(mr), 64)
    }));
    let nbytes = SHAPE_2D.iter().product::<usize>() * DType::FLOAT32.itemsize();
    all.push(workload("empty_2d", "posix_memalign+free", move || {
        posix_memalign_pair(nbytes)
    }));
    all.push(workload("empty_2d", "empty+drop", || {
        empty_2d_with(EmptyOptions::new())
    }));
    // Python's default layout (the seed's): each row padded to a cache
    // line, so its raw pair is of the padded block. A group of its own, so
    // that `empty_2d`'s baseline starts from the allocator state it had.
    let padded = SHAPE_2D[0] * 64;
    all.push(workload(
        "empty_2d/DeviceOptimal",
        "posix_memalign+free",
        move || posix_memalign_pair(padded),
    ));
    all.push(workload("empty_2d/DeviceOptimal", "empty+drop", || {
        empty_2d_with(EmptyOptions::new().layout(DeviceOptimal))
    }));
    // An export is one heap block and a deleter call: compare it with one
    // raw allocation pair of a small block.
    all.push(workload("dlpack_export", "posix_memalign+free", || {
        posix_memalign_pair(64)
    }));
    all.push(workload("dlpack_export", "to_dlpack+deleter", export_2d));
    sweeps::push_dlpark_export(&mut all, "dlpack_export");
    // A driver call through the generated table (and its result layer)
    // against the same symbol of the fake CUDA runtime called directly.
    all.push(workload(
        "driver_call",
        "cuda{Runtime,Driver}GetVersion (direct)",
        direct_driver_call,
    ));
    all.push(workload(
        "driver_call",
        "CudaRuntime::versions (table)",
        table_driver_call,
    ));
    sweeps::push(&mut all);
    all
}
