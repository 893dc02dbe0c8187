//! DLPack import: a hand-made producer (its own heap block and deleter
//! counter, the way a C library would export) and devmm's own exports,
//! imported through both struct versions. Every test checks the deleter
//! runs exactly once, on success, on refusal and across threads; the
//! binary runs under valgrind (scripts/valgrind.sh).

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use devmm::dlpack::{DlpackFlavor, DlpackRequest, ffi};
use devmm::{
    DType, Device, EmptyOptions, Error, MallocMemoryResource, StatisticsAdaptor, Tensor, empty,
    foreign_memory,
};

static COUNTERS: Mutex<()> = Mutex::new(());

/// Every test imports, and the foreign-memory counters are process-wide:
/// the tests run one at a time so one test's figures are its own.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    COUNTERS.lock().unwrap_or_else(|e| e.into_inner())
}

/// A producer's export: the managed struct first, then what it owns.
#[repr(C)]
struct Produced<M> {
    managed: M,
    data: Vec<u8>,
    shape: Vec<i64>,
    strides: Option<Vec<i64>>,
    deleted: Arc<AtomicUsize>,
}

unsafe extern "C" fn delete_versioned(m: *mut ffi::DLManagedTensorVersioned) {
    // SAFETY: `m` is the first field of a boxed `Produced` made by `produce`.
    let produced = unsafe { Box::from_raw(m.cast::<Produced<ffi::DLManagedTensorVersioned>>()) };
    produced.deleted.fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn delete_legacy(m: *mut ffi::DLManagedTensor) {
    // SAFETY: as above, for the legacy struct.
    let produced = unsafe { Box::from_raw(m.cast::<Produced<ffi::DLManagedTensor>>()) };
    produced.deleted.fetch_add(1, Ordering::SeqCst);
}

struct Spec {
    data: Vec<u8>,
    shape: Vec<i64>,
    strides: Option<Vec<i64>>,
    dtype: ffi::DLDataType,
    device: ffi::DLDevice,
    byte_offset: u64,
    version: (u32, u32),
    flags: u64,
    null_data: bool,
}

impl Spec {
    fn f32s(values: &[f32], shape: &[i64]) -> Spec {
        Spec {
            data: values.iter().flat_map(|v| v.to_ne_bytes()).collect(),
            shape: shape.to_vec(),
            strides: None,
            dtype: ffi::DLDataType {
                code: 2,
                bits: 32,
                lanes: 1,
            },
            device: ffi::DLDevice {
                device_type: 1,
                device_id: 0,
            },
            byte_offset: 0,
            version: (1, 1),
            flags: 0,
            null_data: false,
        }
    }
}

fn tensor_of<M>(p: &mut Produced<M>, spec: &Spec) -> ffi::DLTensor {
    ffi::DLTensor {
        data: if spec.null_data {
            std::ptr::null_mut()
        } else {
            p.data.as_mut_ptr().cast::<c_void>()
        },
        device: spec.device,
        ndim: spec.shape.len() as i32,
        dtype: spec.dtype,
        shape: p.shape.as_mut_ptr(),
        strides: p
            .strides
            .as_mut()
            .map_or(std::ptr::null_mut(), |s| s.as_mut_ptr()),
        byte_offset: spec.byte_offset,
    }
}

fn empty_tensor() -> ffi::DLTensor {
    ffi::DLTensor {
        data: std::ptr::null_mut(),
        device: ffi::DLDevice {
            device_type: 1,
            device_id: 0,
        },
        ndim: 0,
        dtype: ffi::DLDataType {
            code: 0,
            bits: 8,
            lanes: 1,
        },
        shape: std::ptr::null_mut(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    }
}

/// Makes an export of `spec` in the flavour asked; returns it and its counter.
fn produce(spec: &Spec, flavor: DlpackFlavor) -> (*mut c_void, Arc<AtomicUsize>) {
    let deleted = Arc::new(AtomicUsize::new(0));
    let raw = match flavor {
        DlpackFlavor::Versioned => {
            let mut p = Box::new(Produced {
                managed: ffi::DLManagedTensorVersioned {
                    version: ffi::DLPackVersion {
                        major: spec.version.0,
                        minor: spec.version.1,
                    },
                    manager_ctx: std::ptr::null_mut(),
                    deleter: Some(delete_versioned),
                    flags: spec.flags,
                    dl_tensor: empty_tensor(),
                },
                data: spec.data.clone(),
                shape: spec.shape.clone(),
                strides: spec.strides.clone(),
                deleted: Arc::clone(&deleted),
            });
            p.managed.dl_tensor = tensor_of(&mut p, spec);
            Box::into_raw(p).cast::<c_void>()
        }
        DlpackFlavor::Legacy => {
            let mut p = Box::new(Produced {
                managed: ffi::DLManagedTensor {
                    dl_tensor: empty_tensor(),
                    manager_ctx: std::ptr::null_mut(),
                    deleter: Some(delete_legacy),
                },
                data: spec.data.clone(),
                shape: spec.shape.clone(),
                strides: spec.strides.clone(),
                deleted: Arc::clone(&deleted),
            });
            p.managed.dl_tensor = tensor_of(&mut p, spec);
            Box::into_raw(p).cast::<c_void>()
        }
    };
    (raw, deleted)
}

fn import(spec: &Spec, flavor: DlpackFlavor) -> (devmm::Result<Tensor>, Arc<AtomicUsize>) {
    let (raw, deleted) = produce(spec, flavor);
    // SAFETY: a fresh export of `flavor`, handed over once.
    (unsafe { Tensor::from_dlpack(raw, flavor) }, deleted)
}

fn read_f32(t: &Tensor) -> Vec<f32> {
    // SAFETY: the producers here fill every byte they describe.
    unsafe { t.as_slice::<f32>() }
        .expect("a host view")
        .to_vec()
}

#[test]
fn both_versions_import_zero_copy_and_delete_once() {
    let _serial = serial();
    for flavor in [DlpackFlavor::Versioned, DlpackFlavor::Legacy] {
        let spec = Spec::f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
        let (t, deleted) = import(&spec, flavor);
        let t = t.expect("imports");
        assert_eq!((t.shape(), t.strides()), (&[2, 3][..], &[3, 1][..]));
        assert_eq!((t.dtype(), t.device()), (DType::FLOAT32, Device::CPU));
        assert!(!t.is_read_only());
        assert_eq!(read_f32(&t), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let clone = t.clone();
        drop(t);
        assert_eq!(deleted.load(Ordering::SeqCst), 0, "a clone still holds it");
        drop(clone);
        assert_eq!(
            deleted.load(Ordering::SeqCst),
            1,
            "{flavor:?}: deleted once"
        );
    }
}

#[test]
fn imported_memory_is_never_viewed_mutably() {
    let _serial = serial();
    let spec = Spec::f32s(&[1.0, 2.0], &[2]);
    let (t, _deleted) = import(&spec, DlpackFlavor::Versioned);
    let mut t = t.expect("imports");
    assert!(!t.is_read_only());
    // The producer may still write the memory: no `&mut` view over it.
    assert!(matches!(
        t.as_mut_slice::<f32>(),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(t.buffer().is_foreign());
    assert_eq!(read_f32(&t), [1.0, 2.0]);
}

#[test]
fn strides_byte_offset_and_read_only_are_honoured() {
    let _serial = serial();
    // A Fortran-order 2x3 view starting 4 bytes into the data.
    let mut spec = Spec::f32s(&[9.0, 1.0, 4.0, 2.0, 5.0, 3.0, 6.0], &[2, 3]);
    spec.strides = Some(vec![1, 2]);
    spec.byte_offset = 4;
    spec.flags = ffi::DLPACK_FLAG_BITMASK_READ_ONLY;
    let (t, deleted) = import(&spec, DlpackFlavor::Versioned);
    let t = t.expect("imports");
    assert_eq!((t.strides(), t.byte_offset()), (&[1, 2][..], 4));
    assert_eq!(t.data_ptr().addr(), t.buffer().ptr().addr() + 4);
    assert!(t.is_read_only());
    // The memory is read-only, not only this tensor: its buffer, and any
    // tensor made over it again, refuse writes.
    assert!(t.buffer().is_read_only());
    // SAFETY: host memory the producer keeps alive until the deleter.
    let write = unsafe { t.buffer().copy_from_host(&[0; 4]) };
    assert!(matches!(write, Err(Error::ReadOnly { .. })), "{write:?}");
    let again = Tensor::bytes_of(Arc::clone(t.buffer())).expect("views the bytes");
    assert!(again.is_read_only());
    drop(again);
    // SAFETY: initialised by the producer.
    let row_major_only = unsafe { t.as_slice::<f32>() };
    assert!(matches!(row_major_only, Err(Error::InvalidLayout { .. })));
    drop(row_major_only);
    drop(t);
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
}

#[test]
fn extent_one_dimensions_may_carry_any_stride() {
    let _serial = serial();
    let mut spec = Spec::f32s(&[1.0, 2.0], &[1, 2]);
    spec.strides = Some(vec![0, 1]);
    let (t, _) = import(&spec, DlpackFlavor::Legacy);
    assert_eq!(t.expect("imports").strides(), &[1, 1]);
}

#[test]
fn zero_size_imports_take_any_strides() {
    let _serial = serial();
    // NumPy sends (0, 0) for an empty (0, 5); nothing is addressed, so any
    // stride (zero, negative) describes the same empty tensor.
    for (shape, strides) in [
        (vec![0, 5], vec![0, 0]),
        (vec![5, 0], vec![0, 0]),
        (vec![2, 0, 3], vec![-3, 0, -1]),
    ] {
        let mut spec = Spec::f32s(&[], &shape);
        spec.strides = Some(strides);
        spec.null_data = true;
        let (t, deleted) = import(&spec, DlpackFlavor::Versioned);
        let t = t.expect("an empty tensor imports whatever its strides");
        assert_eq!((t.numel(), t.shape().len()), (0, shape.len()));
        drop(t);
        assert_eq!(deleted.load(Ordering::SeqCst), 1);
    }
}

#[test]
fn zero_size_imports_hold_no_bytes() {
    let _serial = serial();
    let mut spec = Spec::f32s(&[], &[0, 3]);
    spec.null_data = true;
    let (t, deleted) = import(&spec, DlpackFlavor::Versioned);
    let t = t.expect("imports");
    assert_eq!(
        (t.numel(), t.data_ptr().addr(), t.buffer().nbytes()),
        (0, 0, 0)
    );
    drop(t);
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
}

#[test]
fn refusals_still_delete_exactly_once() {
    let _serial = serial();
    type Spoil = Box<dyn Fn(&mut Spec)>;
    let bad: Vec<(&str, Spoil)> = vec![
        ("major version", Box::new(|s| s.version = (2, 0))),
        (
            "negative stride",
            Box::new(|s| s.strides = Some(vec![-3, 1])),
        ),
        (
            "broadcast stride",
            Box::new(|s| s.strides = Some(vec![0, 1])),
        ),
        (
            "overlapping strides",
            Box::new(|s| s.strides = Some(vec![1, 1])),
        ),
        ("negative extent", Box::new(|s| s.shape = vec![-2, 3])),
        ("null data", Box::new(|s| s.null_data = true)),
        ("dtype code", Box::new(|s| s.dtype.code = 99)),
        ("device type", Box::new(|s| s.device.device_type = 4)),
    ];
    for (what, spoil) in bad {
        for flavor in [DlpackFlavor::Versioned, DlpackFlavor::Legacy] {
            if what == "major version" && flavor == DlpackFlavor::Legacy {
                continue; // the legacy struct has no version
            }
            let mut spec = Spec::f32s(&[1.0; 6], &[2, 3]);
            spoil(&mut spec);
            let (t, deleted) = import(&spec, flavor);
            let err = t.expect_err(what);
            assert!(
                matches!(err, Error::Dlpack { .. } | Error::InvalidLayout { .. }),
                "{what}: {err}"
            );
            assert_eq!(deleted.load(Ordering::SeqCst), 1, "{what} ({flavor:?})");
        }
    }
}

#[test]
fn a_null_pointer_is_refused() {
    let _serial = serial();
    // SAFETY: null is allowed and owns nothing.
    let err = unsafe { Tensor::from_dlpack(std::ptr::null_mut(), DlpackFlavor::Versioned) };
    assert!(matches!(err, Err(Error::Dlpack { .. })));
}

#[test]
fn imports_are_counted_as_foreign_memory_and_named_in_the_chain() {
    let _serial = serial();
    let before = foreign_memory();
    let (t, _) = import(&Spec::f32s(&[1.0; 6], &[2, 3]), DlpackFlavor::Versioned);
    let t = t.expect("imports");
    let during = foreign_memory();
    assert_eq!(during.live_count, before.live_count + 1);
    assert_eq!(during.live_bytes, before.live_bytes + 24);
    assert_eq!(during.total_bytes, before.total_bytes + 24);
    let chain = devmm::resource_chain(t.buffer().resource().as_ref());
    assert_eq!(
        chain,
        "ForeignMemoryResource(device=cpu:0, owner=DLPack import (versioned))"
    );
    assert_eq!(t.buffer().resource().live_count(), Some(1));
    drop(t);
    let after = foreign_memory();
    assert_eq!(
        (after.live_count, after.live_bytes),
        (before.live_count, before.live_bytes)
    );
}

#[test]
fn a_devmm_export_round_trips_and_free_waits_for_the_import() {
    let _serial = serial();
    for request in [DlpackRequest::new(), DlpackRequest::new().max_version(1, 1)] {
        let stats = Arc::new(StatisticsAdaptor::new(MallocMemoryResource::new()));
        let opts = EmptyOptions::new().resource(stats.clone());
        let source = empty(&[4], DType::INT32, &opts).expect("allocates");
        let export = source.to_dlpack(&request).expect("exports");
        let flavor = export.flavor();
        // SAFETY: a live export, handed over once.
        let imported = unsafe { Tensor::from_dlpack(export.into_raw(), flavor) }.expect("imports");
        assert_eq!(imported.data_ptr(), source.data_ptr());
        source
            .buffer()
            .free(source.buffer().stream())
            .expect("free defers while the import lives");
        assert!(source.buffer().is_closed());
        assert_eq!(
            source.buffer().live_exports(),
            1,
            "the import holds the export"
        );
        assert_eq!(stats.current_bytes(), 16, "not released under the import");
        // Re-exporting the import works, and the deleter chain unwinds in order.
        let again = imported
            .to_dlpack(&DlpackRequest::new().max_version(1, 1))
            .expect("re-exports");
        drop(imported);
        assert_eq!(
            source.buffer().live_exports(),
            1,
            "the re-export still holds it"
        );
        assert_eq!(
            stats.current_bytes(),
            16,
            "not released under the re-export"
        );
        drop(again);
        assert_eq!(source.buffer().live_exports(), 0);
        assert_eq!(stats.current_bytes(), 0, "released after the last import");
    }
}

#[test]
fn the_last_handle_may_drop_on_another_thread() {
    let _serial = serial();
    let (t, deleted) = import(&Spec::f32s(&[1.0; 6], &[6]), DlpackFlavor::Versioned);
    let t = t.expect("imports");
    std::thread::spawn(move || drop(t)).join().expect("joins");
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
}

#[test]
fn imports_of_devmm_exports_view_the_first_buffer_at_any_depth() {
    let _serial = serial();
    let source = empty(&[6], DType::UINT8, &EmptyOptions::new()).expect("allocates");
    let before = foreign_memory().live_count;
    let request = DlpackRequest::new().max_version(1, 1);
    let mut x = source.clone();
    // Each import takes the memory from the first buffer: no chain forms,
    // so dropping the last one releases one link, not 100,000 nested ones.
    for _ in 0..100_000 {
        let export = x.to_dlpack(&request).expect("exports");
        // SAFETY: a live export, handed over once.
        x = unsafe { Tensor::from_dlpack(export.into_raw(), DlpackFlavor::Versioned) }
            .expect("imports");
    }
    assert_eq!(x.data_ptr(), source.data_ptr());
    assert_eq!(source.buffer().live_exports(), 1, "the last import's own");
    assert_eq!(foreign_memory().live_count, before + 1);
    // Read-only survives the unwrapping, for the buffer too.
    let export = source.to_read_only().to_dlpack(&request).expect("exports");
    // SAFETY: as above.
    let ro = unsafe { Tensor::from_dlpack(export.into_raw(), DlpackFlavor::Versioned) }
        .expect("imports");
    assert!(ro.is_read_only() && ro.buffer().is_read_only());
    drop((x, ro));
    assert_eq!(source.buffer().live_exports(), 0);
    assert_eq!(foreign_memory().live_count, before);
}
