//! The CPU resources' own contracts: alignment, zero bytes, misuse.

use devmm::mrs::cpu::{HeapMemoryResource, MallocMemoryResource};
use devmm::{DevicePtr, Error, MemoryResource, MisuseKind, Stream};

#[test]
fn alignment_is_configurable_and_honoured() {
    let s = Stream::cpu();
    for align in [1, 2, 4, 8, 64, 256, 4096] {
        let malloc = MallocMemoryResource::with_alignment(align).unwrap();
        let heap = HeapMemoryResource::with_alignment(align).unwrap();
        assert_eq!(
            format!("{malloc:?}"),
            format!("MallocMemoryResource(device=cpu:0, alignment={align})")
        );
        for mr in [&malloc as &dyn MemoryResource, &heap] {
            assert_eq!(mr.guaranteed_alignment(), align);
            let ptrs: Vec<DevicePtr> = (1..20).map(|n| mr.allocate(n * 7, &s).unwrap()).collect();
            for (i, &p) in ptrs.iter().enumerate() {
                assert!(p.is_aligned(align), "{p} not aligned to {align}");
                // SAFETY: allocated just above with (i + 1) * 7 bytes.
                unsafe { mr.deallocate(p, (i + 1) * 7, &s).unwrap() };
            }
        }
    }
    for bad in [0, 3, 6, 48] {
        let err = MallocMemoryResource::with_alignment(bad).unwrap_err();
        assert!(err.to_string().contains("power of two"), "{err}");
        assert!(HeapMemoryResource::with_alignment(bad).is_err());
    }
}

#[test]
fn zero_byte_requests_return_null_and_free_cleanly() {
    let s = Stream::cpu();
    for mr in [
        &MallocMemoryResource::new() as &dyn MemoryResource,
        &HeapMemoryResource::new(),
    ] {
        let p = mr.allocate(0, &s).unwrap();
        assert!(p.is_null());
        // SAFETY: a zero-byte allocation is returned with zero bytes.
        unsafe { mr.deallocate(p, 0, &s).unwrap() };
    }
}

#[test]
fn impossible_sizes_are_out_of_memory_errors() {
    let s = Stream::cpu();
    for mr in [
        &MallocMemoryResource::new() as &dyn MemoryResource,
        &HeapMemoryResource::new(),
    ] {
        let err = mr.allocate(usize::MAX - 8, &s).unwrap_err();
        assert!(matches!(err, Error::OutOfMemory { .. }), "{err:?}");
        assert!(err.to_string().contains("cpu:0"), "{err}");
    }
}

#[test]
fn the_heap_resource_reports_every_kind_of_misuse() {
    let mr = HeapMemoryResource::new();
    let s = Stream::cpu();
    let p = mr.allocate(40, &s).unwrap();
    let kind = |r: devmm::Result<()>| match r {
        Err(Error::Misuse { kind, .. }) => kind,
        other => panic!("expected misuse, got {other:?}"),
    };
    // SAFETY: the heap resource validates its arguments, so misuse is an error.
    unsafe {
        assert_eq!(
            kind(mr.deallocate(p, 41, &s)),
            MisuseKind::WrongSize { allocated: 40 }
        );
        assert_eq!(
            kind(mr.deallocate(DevicePtr::from_addr(0x10), 40, &s)),
            MisuseKind::UnknownPointer
        );
        assert_eq!(
            mr.live_count(),
            Some(1),
            "failed deallocations change nothing"
        );
        mr.deallocate(p, 40, &s).unwrap();
        assert_eq!(kind(mr.deallocate(p, 40, &s)), MisuseKind::DoubleFree);
    }
    assert_eq!(mr.live_count(), Some(0));
    let msg = {
        // SAFETY: as above.
        let err = unsafe { mr.deallocate(p, 40, &s) }.unwrap_err();
        err.to_string()
    };
    assert!(
        msg.contains("double-free")
            && msg.contains("HeapMemoryResource(device=cpu:0, alignment=64)"),
        "{msg}"
    );
    assert!(mr.detects_misuse() && !MallocMemoryResource::new().detects_misuse());
}
