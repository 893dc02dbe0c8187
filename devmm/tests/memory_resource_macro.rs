//! Resources and adaptors written with `#[memory_resource]`, exercised
//! through the `MemoryResource` trait: the checks the macro adds (alignment
//! honesty, the ledger's misuse detection, live counts) and the forwarding
//! of adaptors over concrete, generic and `Arc<dyn MemoryResource>` upstreams.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use devmm::testing::{MrConformanceOptions, mr_conformance};
use devmm::{
    Device, DevicePtr, Error, HeapMemoryResource, Ledger, MallocMemoryResource, MemoryResource,
    MisuseKind, Result, Stream, memory_resource, resource_chain,
};

/// A resource over the global allocator that hands out `offset` bytes past
/// an aligned block, so tests can make it break its alignment promise.
#[derive(Debug, Default)]
struct Blocks {
    offset: usize,
    ledger: Ledger,
}

#[memory_resource(device = "cpu", alignment = 64, ledger = ledger, debug = true)]
impl Blocks {
    /// One spare alignment unit, so `offset` stays inside the block.
    fn layout(nbytes: usize) -> Option<std::alloc::Layout> {
        let size = nbytes.max(1).checked_add(64)?;
        std::alloc::Layout::from_size_align(size, 64).ok()
    }

    fn allocate(&self, nbytes: usize) -> Result<DevicePtr> {
        let out_of_memory = || Error::OutOfMemory {
            device: Device::CPU,
            nbytes,
            chain: "Blocks".into(),
            detail: None,
            pool: None,
        };
        let layout = Self::layout(nbytes).ok_or_else(out_of_memory)?;
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { std::alloc::alloc(layout) };
        if raw.is_null() {
            return Err(out_of_memory());
        }
        Ok(DevicePtr::from_addr(raw as usize + self.offset))
    }

    unsafe fn deallocate(&self, ptr: DevicePtr, nbytes: usize) -> Result<()> {
        let layout = Self::layout(nbytes).expect("a live allocation's layout was valid");
        // SAFETY: `ptr - offset` came from `alloc` with this layout.
        unsafe { std::alloc::dealloc((ptr.addr() - self.offset) as *mut u8, layout) };
        Ok(())
    }

    /// Real host memory from the global allocator: the testing kit's
    /// default copies may reach it.
    fn dereferenceable(&self) -> bool {
        true
    }
}

#[test]
fn a_generated_resource_reports_its_probes() {
    let mr = Blocks::default();
    assert_eq!(mr.device(), Device::CPU);
    assert_eq!(mr.guaranteed_alignment(), 64);
    assert!(!mr.stream_ordered());
    assert!(mr.detects_misuse());
    assert!(mr.upstream().is_none());
    assert!(mr.available_memory().unwrap().total > 0);
}

#[test]
fn the_ledger_counts_and_catches_misuse() {
    let mr = Blocks::default();
    let s = Stream::cpu();
    let p = mr.allocate(100, &s).unwrap();
    let q = mr.allocate(10, &s).unwrap();
    assert!(p.is_aligned(64));
    assert_eq!(mr.live_count(), Some(2));
    // SAFETY: misuse is detected by the ledger and reported, not performed.
    let wrong = unsafe { mr.deallocate(p, 99, &s) };
    assert!(
        matches!(
            wrong,
            Err(Error::Misuse {
                kind: MisuseKind::WrongSize { allocated: 100 },
                nbytes: 99,
                ..
            })
        ),
        "{wrong:?}"
    );
    // SAFETY: p and q are live with these sizes.
    unsafe {
        mr.deallocate(p, 100, &s).unwrap();
        mr.deallocate(q, 10, &s).unwrap();
    }
    assert_eq!(mr.live_count(), Some(0));
    // SAFETY: as above, detected.
    let twice = unsafe { mr.deallocate(p, 100, &s) };
    assert!(
        matches!(
            twice,
            Err(Error::Misuse {
                kind: MisuseKind::DoubleFree,
                ..
            })
        ),
        "{twice:?}"
    );
    // SAFETY: as above, detected.
    let unknown = unsafe { mr.deallocate(DevicePtr::from_addr(0x40), 8, &s) };
    assert!(
        matches!(
            unknown,
            Err(Error::Misuse {
                kind: MisuseKind::UnknownPointer,
                ..
            })
        ),
        "{unknown:?}"
    );
}

#[test]
fn a_pointer_breaking_the_promised_alignment_is_an_error() {
    let mr = Blocks {
        offset: 8,
        ..Blocks::default()
    };
    let result = mr.allocate(16, &Stream::cpu());
    match result {
        Err(Error::Misuse {
            kind: MisuseKind::Misaligned { promised: 64 },
            nbytes: 16,
            device,
            ..
        }) => {
            assert_eq!(device, Device::CPU)
        }
        other => panic!("expected a misaligned-pointer error, got {other:?}"),
    }
    // The misaligned block was given back, not recorded.
    assert_eq!(mr.live_count(), Some(0));
}

/// Counts allocations; everything else forwards to `inner`.
#[memory_resource]
#[derive(Debug)]
struct Counting<U> {
    #[upstream]
    inner: U,
    allocations: AtomicUsize,
}

#[memory_resource]
impl<U: MemoryResource> Counting<U> {
    fn new(inner: U) -> Self {
        Counting {
            inner,
            allocations: AtomicUsize::new(0),
        }
    }

    fn allocate(&self, nbytes: usize, stream: &Stream) -> Result<DevicePtr> {
        self.allocations.fetch_add(1, Ordering::Relaxed);
        self.inner.allocate(nbytes, stream)
    }
}

#[test]
fn an_adaptor_forwards_what_it_does_not_write() {
    let mr = Counting::new(HeapMemoryResource::new());
    let s = Stream::cpu();
    let p = mr.allocate(32, &s).unwrap();
    assert_eq!(mr.allocations.load(Ordering::Relaxed), 1);
    assert_eq!(mr.live_count(), Some(1));
    assert!(mr.detects_misuse());
    assert_eq!(mr.guaranteed_alignment(), 64);
    assert_eq!(mr.device(), Device::CPU);
    // SAFETY: forwarded to the heap resource, which detects the misuse.
    let wrong = unsafe { mr.deallocate(p, 31, &s) };
    assert!(matches!(wrong, Err(Error::Misuse { .. })), "{wrong:?}");
    // SAFETY: p is live with 32 bytes.
    unsafe { mr.deallocate(p, 32, &s).unwrap() };
    assert_eq!(mr.live_count(), Some(0));
    assert_eq!(
        resource_chain(&mr),
        "Counting -> HeapMemoryResource(device=cpu:0, alignment=64)"
    );
}

#[test]
fn an_adaptor_over_a_shared_trait_object() {
    let shared: Arc<dyn MemoryResource> = Arc::new(MallocMemoryResource::new());
    let mr = Counting::new(Arc::clone(&shared));
    let s = Stream::cpu();
    let p = mr.allocate(8, &s).unwrap();
    // SAFETY: p is live with 8 bytes.
    unsafe { mr.deallocate(p, 8, &s).unwrap() };
    assert_eq!(mr.allocations.load(Ordering::Relaxed), 1);
    assert!(mr.upstream().is_some());
    assert_eq!(
        resource_chain(&mr),
        "Counting -> MallocMemoryResource(device=cpu:0, alignment=64)"
    );
}

/// Forwarded failures name the adaptor in their chain.
#[test]
fn forwarded_failures_name_the_adaptor() {
    let mr = Counting::new(devmm::LimitingAdaptor::new(MallocMemoryResource::new(), 16));
    let err = mr.allocate(17, &Stream::cpu()).unwrap_err();
    match err {
        Error::LimitExceeded { chain, .. } => assert_eq!(
            chain,
            "Counting -> LimitingAdaptor -> MallocMemoryResource(device=cpu:0, alignment=64)"
        ),
        other => panic!("expected a limit error, got {other:?}"),
    }
}

/// The testing kit's contract, for resources and adaptors the macro wrote.
#[test]
fn generated_resources_pass_mr_conformance() {
    let report = mr_conformance(|| Ok(Blocks::default()), &MrConformanceOptions::new());
    assert!(report.is_ok(), "{report}");
    let report = mr_conformance(
        || Ok(Counting::new(HeapMemoryResource::new())),
        &MrConformanceOptions::new(),
    );
    assert!(report.is_ok(), "{report}");
    let report = mr_conformance(
        || {
            let shared: Arc<dyn MemoryResource> = Arc::new(Blocks::default());
            Ok(Counting::new(shared))
        },
        &MrConformanceOptions::new(),
    );
    assert!(report.is_ok(), "{report}");
}

/// A resource that breaks its alignment promise fails the kit's checks
/// with the macro's error instead of handing out the bad pointer.
#[test]
fn a_dishonest_resource_is_caught_not_trusted() {
    let report = mr_conformance(
        || {
            Ok(Blocks {
                offset: 8,
                ..Blocks::default()
            })
        },
        &MrConformanceOptions::new(),
    );
    // Every allocation is refused with the macro's misalignment error, so
    // the kit never holds a misaligned pointer: each failed check says so.
    let failures: Vec<_> = report.failures().collect();
    assert!(
        failures.iter().any(|c| c.name == "alignment_honesty"),
        "{report}"
    );
    for check in failures {
        let text = format!("{:?}", check.status);
        assert!(
            text.contains(
                "allocate returned a pointer that is not aligned to the promised 64 bytes"
            ),
            "{report}"
        );
    }
}

/// Refuses requests over a budget with an error it builds itself.
#[memory_resource]
#[derive(Debug)]
struct Budget<U> {
    #[upstream]
    inner: U,
    budget: usize,
}

#[memory_resource]
impl<U: MemoryResource> Budget<U> {
    fn allocate(&self, nbytes: usize, stream: &Stream) -> Result<DevicePtr> {
        if nbytes > self.budget {
            return Err(Error::LimitExceeded {
                device: self.device(),
                nbytes,
                limit: self.budget,
                in_use: 0,
                chain: resource_chain(self),
            });
        }
        self.inner.allocate(nbytes, stream)
    }
}

/// Errors an adaptor builds name the chain once; errors from below get the
/// adaptor's name prefixed, also through a written `allocate`.
#[test]
fn error_chains_name_each_adaptor_once() {
    let mr = Budget {
        inner: Counting::new(devmm::LimitingAdaptor::new(MallocMemoryResource::new(), 16)),
        budget: 32,
    };
    let own = mr.allocate(33, &Stream::cpu()).unwrap_err();
    let below = mr.allocate(17, &Stream::cpu()).unwrap_err();
    let chain = |e: Error| match e {
        Error::LimitExceeded { chain, .. } => chain,
        other => panic!("expected a limit error, got {other:?}"),
    };
    let full =
        "Budget -> Counting -> LimitingAdaptor -> MallocMemoryResource(device=cpu:0, alignment=64)";
    assert_eq!(chain(own), full);
    assert_eq!(chain(below), full);
}
