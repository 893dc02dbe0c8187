//! DLPack export read back by an independent consumer (the `dlpark` crate),
//! property tests over random layouts, and the lifetime rules: deleters on
//! other threads, `free()` deferred by live exports, resource chains kept alive.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

use devmm::dlpack::{DlpackExport, DlpackFlavor, DlpackRequest, ffi};
use devmm::testing::{RecordedCall, RecordingMemoryResource};
use devmm::{
    Aligned, ColMajor, DType, EmptyOptions, Error, HeapMemoryResource, LayoutPolicy,
    MemoryResource, Permuted, RowMajor, StatisticsAdaptor, Tensor, empty,
};
use proptest::prelude::*;

/// What a consumer sees, read through dlpark's validated view.
#[derive(Debug, PartialEq)]
struct Seen {
    data: usize,
    shape: Vec<i64>,
    strides: Vec<i64>,
    dtype: (u8, u8, u16),
    device: (u32, i32),
    version: Option<(u32, u32)>,
    read_only: bool,
}

/// What the tensor says a consumer must see.
fn expected(tensor: &Tensor, versioned: bool) -> Seen {
    let (ty, id) = tensor.device().dlpack_device();
    Seen {
        data: tensor.data_ptr().addr(),
        shape: tensor.shape().iter().map(|&d| d as i64).collect(),
        strides: tensor.strides().iter().map(|&s| s as i64).collect(),
        dtype: (
            tensor.dtype().code() as u8,
            tensor.dtype().bits(),
            tensor.dtype().lanes(),
        ),
        device: (ty as u32, id),
        version: versioned.then_some((1, 1)),
        read_only: versioned && tensor.is_read_only(),
    }
}

fn seen(t: &dlpark::TensorRef<'_>, version: Option<(u32, u32)>, read_only: bool) -> Seen {
    Seen {
        data: t.data_ptr() as usize,
        shape: t.shape().to_vec(),
        // A 0-d tensor has no strides to show; ours are explicit otherwise.
        strides: t.strides().map(<[i64]>::to_vec).unwrap_or_else(|| {
            assert_eq!(t.ndim(), 0, "strides must be explicit");
            Vec::new()
        }),
        dtype: (t.dtype().code.0, t.dtype().bits, t.dtype().lanes),
        device: (t.device().device_type.0, t.device().device_id),
        version,
        read_only,
    }
}

/// Hands `export` to dlpark, which takes ownership (and calls our deleter
/// when it drops), and runs `inspect` on its view.
fn consume<R>(export: DlpackExport, inspect: impl FnOnce(&dlpark::TensorRef<'_>, Seen) -> R) -> R {
    match export.flavor() {
        DlpackFlavor::Versioned => {
            let raw = export
                .into_raw()
                .cast::<dlpark::ffi::DLManagedTensorVersioned>();
            // SAFETY: a versioned export from `into_raw`; dlpark deletes it once.
            let managed = unsafe { dlpark::versioned::Dlpack::from_raw(raw) }
                .expect("dlpark accepts the version");
            let version = managed.version();
            let read_only = managed.flags().contains(dlpark::DlpackFlags::READ_ONLY);
            let view = managed.validate().expect("dlpark validates the export");
            let s = seen(&view, Some((version.major, version.minor)), read_only);
            inspect(&view, s)
        }
        DlpackFlavor::Legacy => {
            let raw = export.into_raw().cast::<dlpark::ffi::DLManagedTensor>();
            // SAFETY: a legacy export from `into_raw`; dlpark deletes it once.
            let managed = unsafe { dlpark::legacy::Dlpack::from_raw(raw) }.expect("non-null");
            let view = managed.validate().expect("dlpark validates the export");
            let s = seen(&view, None, false);
            inspect(&view, s)
        }
    }
}

fn tensor_on(
    mr: Arc<dyn MemoryResource>,
    shape: &[usize],
    dtype: DType,
    policy: impl LayoutPolicy,
) -> Tensor {
    empty(
        shape,
        dtype,
        &EmptyOptions::new().layout(policy).resource(mr),
    )
    .expect("allocates")
}

#[test]
fn dlpark_reads_a_versioned_export_and_its_bytes() {
    let t = tensor_on(
        Arc::new(HeapMemoryResource::new()),
        &[2, 3],
        DType::FLOAT32,
        RowMajor,
    );
    let values: Vec<u8> = [1.5f32, 2.0, -3.0, 4.25, 5.0, 6.5]
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect();
    // SAFETY: the tensor's resource hands out real host memory.
    unsafe { t.buffer().copy_from_host(&values).unwrap() };
    let export = t
        .to_dlpack(&DlpackRequest::new().max_version(1, 1))
        .unwrap();
    consume(export, |view, seen| {
        assert_eq!(seen, expected(&t, true));
        assert_eq!(t.buffer().live_exports(), 1);
        // SAFETY: host memory of six initialised f32, alive while dlpark holds the export.
        let data = unsafe { view.cpu_slice::<f32>() }.unwrap();
        assert_eq!(data, &[1.5, 2.0, -3.0, 4.25, 5.0, 6.5]);
    });
    assert_eq!(
        t.buffer().live_exports(),
        0,
        "dlpark's drop ran our deleter"
    );
}

#[test]
fn dlpark_reads_a_legacy_export_of_a_permuted_tensor() {
    let t = tensor_on(
        Arc::new(HeapMemoryResource::new()),
        &[2, 3, 4],
        DType::INT16,
        Permuted::new([1, 2, 0]),
    );
    let export = t.to_dlpack(&DlpackRequest::new()).unwrap();
    assert_eq!(export.flavor().capsule_name(), c"dltensor");
    consume(export, |_, seen| {
        assert_eq!(seen, expected(&t, false));
        assert_eq!(seen.strides, [1, 8, 2]);
    });
    assert_eq!(t.buffer().live_exports(), 0);
}

#[test]
fn read_only_exports_carry_the_flag_and_refuse_legacy_consumers() {
    let t = tensor_on(
        Arc::new(HeapMemoryResource::new()),
        &[4],
        DType::UINT8,
        RowMajor,
    )
    .to_read_only();
    consume(
        t.to_dlpack(&DlpackRequest::new().max_version(1, 0))
            .unwrap(),
        |_, seen| {
            assert!(seen.read_only);
            // Stamped no newer than the consumer reads.
            assert_eq!(seen.version, Some((1, 0)));
        },
    );
    let err = t.to_dlpack(&DlpackRequest::new()).unwrap_err();
    assert!(matches!(err, Error::Dlpack { .. }));
    assert!(
        err.to_string()
            .ends_with("request max_version >= (1, 0) or export a writable tensor"),
        "{err}"
    );
}

#[test]
fn refusals_are_typed_and_say_what_to_do() {
    let t = tensor_on(
        Arc::new(HeapMemoryResource::new()),
        &[2, 2],
        DType::FLOAT32,
        RowMajor,
    );
    let refusal = |request: DlpackRequest| match t.to_dlpack(&request) {
        Err(Error::Dlpack { reason }) => reason,
        other => panic!("{request:?} must be refused, got {other:?}"),
    };
    assert_eq!(
        refusal(DlpackRequest::new().max_version(1, 1).copy(true)),
        "copy=True is not supported; devmm exports are always zero-copy; call Tensor.to(device) for a copy and export that"
    );
    let cross = refusal(DlpackRequest::new().max_version(1, 1).dl_device(2, 0));
    assert!(
        cross.contains("dl_device=(2, 0)") && cross.contains("omit dl_device"),
        "{cross}"
    );
    assert!(
        cross.contains(r#"call Tensor.to("cuda:0") for a copy on cuda:0 and export that"#),
        "the refusal points at the explicit copy: {cross}"
    );
    // A device type devmm does not even know (OpenCL) is a refusal too, not a parse error.
    let unknown = refusal(DlpackRequest::new().dl_device(4, 0));
    assert!(unknown.contains("call Tensor.to(device)"), "{unknown}");
    // The accepted spellings of the same arguments.
    drop(
        t.to_dlpack(
            &DlpackRequest::new()
                .max_version(1, 1)
                .copy(false)
                .dl_device(1, 0),
        )
        .unwrap(),
    );
    // A stream the CPU does not have is the runtime's stream error, and leaves no export behind.
    let err = t
        .to_dlpack(&DlpackRequest::new().max_version(1, 1).stream(7))
        .unwrap_err();
    assert!(matches!(err, Error::Stream { .. }), "{err:?}");
    assert_eq!(t.buffer().live_exports(), 0);
    t.buffer().free(t.buffer().stream()).unwrap();
    let freed = refusal(DlpackRequest::new().max_version(1, 1));
    assert!(
        freed.contains("was freed") && freed.contains("allocate a new tensor"),
        "{freed}"
    );
    assert_eq!(t.buffer().live_exports(), 0);
}

#[test]
fn zero_size_exports_have_null_data_and_explicit_strides() {
    let t = tensor_on(
        Arc::new(HeapMemoryResource::new()),
        &[3, 0],
        DType::FLOAT64,
        ColMajor,
    );
    for request in [DlpackRequest::new(), DlpackRequest::new().max_version(1, 1)] {
        let export = t.to_dlpack(&request).unwrap();
        assert!(export.dl_tensor().data.is_null());
        assert!(!export.dl_tensor().strides.is_null());
        assert_eq!(export.strides(), &[1, 3]);
        consume(export, |view, seen| {
            assert_eq!(seen.data, 0);
            assert_eq!(view.num_elements(), 0);
        });
    }
}

#[test]
fn the_deleter_runs_on_another_thread() {
    let heap = Arc::new(HeapMemoryResource::new());
    let t = tensor_on(heap.clone(), &[16], DType::UINT8, RowMajor);
    let raw = t
        .to_dlpack(&DlpackRequest::new().max_version(1, 1))
        .unwrap()
        .into_raw() as usize;
    t.buffer().free(t.buffer().stream()).unwrap();
    assert_eq!(heap.live_count(), Some(1), "the export holds the memory");
    drop(t);
    std::thread::spawn(move || {
        let managed = raw as *mut ffi::DLManagedTensorVersioned;
        // SAFETY: `raw` is a live versioned export; this is its one deleter call.
        unsafe { ((*managed).deleter.expect("set"))(managed) };
    })
    .join()
    .unwrap();
    assert_eq!(
        heap.live_count(),
        Some(0),
        "the deleter released the freed buffer"
    );
}

#[test]
fn free_with_live_exports_defers_the_release_to_the_last_deleter() {
    let recording = Arc::new(RecordingMemoryResource::new());
    let t = tensor_on(recording.clone(), &[8], DType::FLOAT64, RowMajor);
    let a = t
        .to_dlpack(&DlpackRequest::new().max_version(1, 1))
        .unwrap();
    let b = t.to_dlpack(&DlpackRequest::new()).unwrap();
    t.buffer().free(t.buffer().stream()).unwrap();
    assert!(t.buffer().is_closed());
    assert_eq!(recording.live(), BTreeMap::from([(256, 64)]));
    assert!(matches!(
        t.to_dlpack(&DlpackRequest::new()),
        Err(Error::Dlpack { .. })
    ));
    drop(a);
    assert_eq!(recording.live(), BTreeMap::from([(256, 64)]));
    drop(b);
    assert_eq!(recording.live(), BTreeMap::new());
    t.buffer().free(t.buffer().stream()).unwrap();
    drop(t);
    let deallocations = recording
        .calls()
        .into_iter()
        .filter(|c| matches!(c, RecordedCall::Deallocate { .. }))
        .collect::<Vec<_>>();
    assert_eq!(
        deallocations.len(),
        1,
        "released exactly once: {deallocations:?}"
    );
}

/// Exports, deleters on another thread and `free()` from two threads race
/// on one buffer, round after round: the memory goes back exactly once,
/// never while an export is live, and every export that succeeded can
/// write its memory until its deleter runs (under valgrind, a write after
/// the release is an invalid write).
#[test]
fn exports_deleters_and_frees_racing_release_exactly_once_after_the_last_deleter() {
    use std::sync::Barrier;
    use std::sync::mpsc;
    const ROUNDS: usize = 60;
    const EXPORTERS: usize = 3;
    const FREERS: usize = 2;
    // An exporter stops here even if no free has closed the buffer yet:
    // under valgrind, which runs one thread at a time for long slices, the
    // freers can start late and the exporters would otherwise export (and
    // queue to the deleter) without end. Natively a free lands within the
    // first few exports.
    const MAX_EXPORTS: usize = 500;
    let mut exported = 0;
    for round in 0..ROUNDS {
        let mr = Arc::new(StatisticsAdaptor::new(devmm::MallocMemoryResource::new()));
        let t = Arc::new(tensor_on(mr.clone(), &[64], DType::UINT8, RowMajor));
        let start = Arc::new(Barrier::new(EXPORTERS + FREERS));
        let (handoff, received) = mpsc::channel::<usize>();
        let deleter = {
            let mr = mr.clone();
            std::thread::spawn(move || {
                for raw in received {
                    let managed = raw as *mut ffi::DLManagedTensorVersioned;
                    assert_eq!(
                        mr.statistics().deallocations,
                        0,
                        "released under a live export"
                    );
                    // SAFETY: a live versioned export of 64 host bytes, sent
                    // here once; this is its one deleter call.
                    unsafe {
                        (*managed).dl_tensor.data.cast::<u8>().add(63).write(1);
                        ((*managed).deleter.expect("set"))(managed);
                    }
                }
            })
        };
        let exporters: Vec<_> = (0..EXPORTERS)
            .map(|e| {
                let (t, mr, start, handoff) =
                    (t.clone(), mr.clone(), start.clone(), handoff.clone());
                std::thread::spawn(move || {
                    start.wait();
                    let request = DlpackRequest::new().max_version(1, 1);
                    let mut done = 0usize;
                    while done < MAX_EXPORTS {
                        let export = match t.to_dlpack(&request) {
                            Ok(export) => export,
                            Err(Error::Dlpack { .. }) => return done,
                            Err(other) => panic!("{other}"),
                        };
                        done += 1;
                        // SAFETY: 64 host bytes the live export keeps allocated.
                        unsafe { export.dl_tensor().data.cast::<u8>().add(e).write(2) };
                        assert_eq!(
                            mr.statistics().deallocations,
                            0,
                            "released under a live export"
                        );
                        match done % 2 {
                            0 => handoff.send(export.into_raw() as usize).unwrap(),
                            _ => drop(export),
                        }
                    }
                    done
                })
            })
            .collect();
        drop(handoff);
        let freers: Vec<_> = (0..FREERS)
            .map(|_| {
                let (t, start) = (t.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    for _ in 0..round % 8 {
                        std::thread::yield_now();
                    }
                    t.buffer().free(t.buffer().stream()).unwrap();
                    assert!(t.buffer().is_closed());
                })
            })
            .collect();
        for f in freers {
            f.join().unwrap();
        }
        exported += exporters
            .into_iter()
            .map(|e| e.join().unwrap())
            .sum::<usize>();
        deleter.join().unwrap();
        let s = mr.statistics();
        assert_eq!(
            (s.deallocations, s.current_bytes, t.buffer().live_exports()),
            (1, 0, 0),
            "round {round}"
        );
    }
    assert!(exported > 0, "no export ever won the race");
}

#[test]
fn exported_host_memory_stays_usable_after_free_until_the_deleter() {
    // Under valgrind this is the use-after-free check: the consumer writes
    // and reads the data after devmm's free() and after the tensor is gone.
    let heap = Arc::new(HeapMemoryResource::new());
    let t = tensor_on(heap.clone(), &[32], DType::UINT8, RowMajor);
    let export = t
        .to_dlpack(&DlpackRequest::new().max_version(1, 1))
        .unwrap();
    t.buffer().free(t.buffer().stream()).unwrap();
    drop(t);
    let data = export.dl_tensor().data.cast::<u8>();
    for i in 0..32 {
        // SAFETY: 32 bytes of host memory the export keeps alive.
        unsafe { data.add(i).write(i as u8) };
    }
    // SAFETY: as above, now initialised.
    let sum: u32 = (0..32)
        .map(|i| u32::from(unsafe { data.add(i).read() }))
        .sum();
    assert_eq!(sum, 496);
    assert_eq!(heap.live_count(), Some(1));
    drop(export);
    assert_eq!(heap.live_count(), Some(0));
}

#[test]
fn an_export_keeps_the_whole_resource_chain_alive() {
    let chain: Arc<dyn MemoryResource> =
        Arc::new(StatisticsAdaptor::new(HeapMemoryResource::new()));
    let weak: Weak<dyn MemoryResource> = Arc::downgrade(&chain);
    let t = tensor_on(chain, &[10], DType::INT32, RowMajor);
    let export = t.to_dlpack(&DlpackRequest::new()).unwrap();
    drop(t);
    let alive = weak.upgrade().expect("the export keeps the resource alive");
    assert!(format!("{alive:?}").contains("StatisticsAdaptor"));
    drop(alive);
    drop(export);
    assert!(weak.upgrade().is_none(), "the deleter let the chain go");
}

#[test]
fn an_untaken_export_is_deleted_on_drop_and_from_raw_takes_one_back() {
    let heap = Arc::new(HeapMemoryResource::new());
    let t = tensor_on(heap, &[3], DType::FLOAT32, RowMajor);
    let flavor = DlpackRequest::new().max_version(1, 1).flavor();
    let raw = t
        .to_dlpack(&DlpackRequest::new().max_version(1, 1))
        .unwrap()
        .into_raw();
    assert_eq!(t.buffer().live_exports(), 1);
    // SAFETY: `raw` came from `into_raw` of a versioned export, never deleted.
    let back = unsafe { DlpackExport::from_raw(raw, flavor) }.unwrap();
    assert_eq!(back.as_ptr(), raw);
    assert_eq!(back.version(), Some((1, 1)));
    drop(back);
    assert_eq!(t.buffer().live_exports(), 0);
    // SAFETY: null is allowed and gives nothing.
    assert!(unsafe { DlpackExport::from_raw(std::ptr::null_mut(), flavor) }.is_none());
}

// ---- property: random layouts ----

fn policy_strategy(ndim: usize) -> impl Strategy<Value = (Arc<dyn LayoutPolicy>, String)> {
    let order = Just((0..ndim).collect::<Vec<_>>()).prop_shuffle();
    (
        0..3u8,
        order,
        prop::option::of((
            prop::sample::select(vec![1usize, 16, 64, 128]),
            prop::sample::select(vec![16usize, 64, 256, 4096]),
        )),
    )
        .prop_map(|(kind, order, padding)| {
            let (inner, name): (Arc<dyn LayoutPolicy>, String) = match kind {
                0 => (Arc::new(RowMajor), "RowMajor".into()),
                1 => (Arc::new(ColMajor), "ColMajor".into()),
                _ => (
                    Arc::new(Permuted::new(order.clone())),
                    format!("Permuted({order:?})"),
                ),
            };
            match padding {
                None => (inner, name),
                Some((unit, base)) => (
                    Arc::new(Aligned::over(inner, unit, base).expect("powers of two"))
                        as Arc<dyn LayoutPolicy>,
                    format!("Aligned({name}, {unit}, {base})"),
                ),
            }
        })
}

fn case_strategy()
-> impl Strategy<Value = (Vec<usize>, DType, Arc<dyn LayoutPolicy>, String, bool, bool)> {
    prop::collection::vec(0usize..5, 0..=4).prop_flat_map(|shape| {
        let ndim = shape.len();
        (
            Just(shape),
            prop::sample::select(DType::STANDARD.to_vec()),
            policy_strategy(ndim),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(shape, dtype, (policy, name), versioned, read_only)| {
                (shape, dtype, policy, name, versioned, read_only)
            })
    })
}

/// Every element address a consumer computes from data, shape, strides and
/// dtype, as byte offsets from data.
fn element_offsets(shape: &[i64], strides: &[i64], itemsize: usize) -> Vec<usize> {
    let mut offsets = vec![0usize];
    for (&extent, &stride) in shape.iter().zip(strides) {
        offsets = offsets
            .iter()
            .flat_map(|&base| {
                (0..extent as usize).map(move |i| base + i * stride as usize * itemsize)
            })
            .collect();
    }
    offsets
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(128)
    ))]

    #[test]
    fn every_field_a_consumer_reads_matches_the_tensor(
        (shape, dtype, policy, name, versioned, read_only) in case_strategy()
    ) {
        let heap = Arc::new(HeapMemoryResource::new());
        let options = EmptyOptions::new().layout_shared(policy).resource(heap.clone());
        let t = empty(&shape, dtype, &options).expect(&name);
        // Shadowing would keep the writable original (and its buffer) alive.
        let t = if read_only {
            let writable = t;
            writable.to_read_only()
        } else {
            t
        };
        let request = if versioned { DlpackRequest::new().max_version(1, 1) } else { DlpackRequest::new() };
        let result = t.to_dlpack(&request);
        if read_only && !versioned {
            prop_assert!(matches!(result, Err(Error::Dlpack { .. })), "a read-only legacy export was not refused");
            return Ok(());
        }
        let export = result.expect("exports");
        prop_assert_eq!(export.dl_tensor().byte_offset, 0);
        let itemsize = dtype.itemsize();
        let buffer_start = t.buffer().ptr().addr();
        let buffer_end = buffer_start + t.buffer().nbytes();
        let wrote = consume(export, |view, seen| -> Result<bool, TestCaseError> {
            prop_assert_eq!(&seen, &expected(&t, versioned), "{}", name);
            if t.numel() == 0 {
                prop_assert_eq!(seen.data, 0);
                return Ok(false);
            }
            let layout = t.layout();
            prop_assert!(seen.data % layout.base_alignment() == 0, "data {:#x} breaks the base alignment", seen.data);
            let offsets = element_offsets(view.shape(), &seen.strides, itemsize);
            prop_assert_eq!(offsets.len(), t.numel());
            let mut sorted = offsets.clone();
            sorted.sort_unstable();
            prop_assert!(sorted.windows(2).all(|w| w[1] >= w[0] + itemsize), "elements overlap: {:?}", seen.strides);
            let last = seen.data + sorted.last().copied().unwrap_or(0) + itemsize;
            prop_assert!(seen.data >= buffer_start && last <= buffer_end, "an element lies outside the buffer");
            // Write each element's ordinal through the consumer's addresses.
            for (ordinal, &offset) in offsets.iter().enumerate() {
                // SAFETY: host memory inside the buffer (checked above), kept
                // alive by the export dlpark holds.
                unsafe {
                    std::ptr::write_bytes((seen.data + offset) as *mut u8, (ordinal % 251) as u8, itemsize)
                };
            }
            Ok(true)
        })?;
        if wrote {
            // Read the whole buffer back through devmm: every element holds its ordinal.
            let mut bytes = vec![0u8; t.buffer().nbytes()];
            // SAFETY: the tensor's resource hands out real host memory.
            unsafe { t.buffer().copy_to_host(&mut bytes).unwrap() };
            let start = t.data_ptr().addr() - buffer_start;
            let offsets = element_offsets(
                &t.shape().iter().map(|&d| d as i64).collect::<Vec<_>>(),
                &t.strides().iter().map(|&s| s as i64).collect::<Vec<_>>(),
                itemsize,
            );
            for (ordinal, offset) in offsets.into_iter().enumerate() {
                let element = &bytes[start + offset..start + offset + itemsize];
                prop_assert!(element.iter().all(|&b| b == (ordinal % 251) as u8));
            }
        }
        prop_assert_eq!(t.buffer().live_exports(), 0);
        drop(t);
        prop_assert_eq!(heap.live_count(), Some(0));
    }
}

#[test]
fn vector_dtypes_keep_their_lanes() {
    let float4 = DType::new(devmm::DTypeCode::Float, 32, 4).unwrap();
    let t = tensor_on(
        Arc::new(HeapMemoryResource::new()),
        &[3, 2],
        float4,
        RowMajor,
    );
    consume(
        t.to_dlpack(&DlpackRequest::new().max_version(1, 1))
            .unwrap(),
        |view, seen| {
            assert_eq!(seen, expected(&t, true));
            assert_eq!(seen.dtype, (2, 32, 4));
            assert_eq!(view.num_bytes(), 6 * 16);
        },
    );
}

/// The CPU's stream rule holds on the export's path, whether it asks the
/// runtime (a stream named) or takes its recorded answer (none named on
/// cpu:0): every named stream is refused, no stream (or -1, "no
/// synchronization") exports, and memory claiming another cpu device is
/// still refused by the runtime.
#[test]
fn a_cpu_export_refuses_every_named_stream_and_exports_without_one() {
    let t = empty(&[2, 3], DType::FLOAT32, &EmptyOptions::new()).unwrap();
    let unsynchronized = t
        .to_dlpack(&DlpackRequest::new().max_version(1, 1).stream(-1))
        .unwrap();
    drop(unsynchronized);
    for value in [-2, 0, 1, 2] {
        let request = DlpackRequest::new().max_version(1, 1).stream(value);
        let err = t.to_dlpack(&request).unwrap_err();
        assert!(
            matches!(err, Error::Stream { .. }),
            "stream={value}: {err:?}"
        );
        assert_eq!(t.buffer().live_exports(), 0);
    }
    let export = t
        .to_dlpack(&DlpackRequest::new().max_version(1, 1))
        .unwrap();
    assert_eq!(t.buffer().live_exports(), 1);
    drop(export);
    assert_eq!(t.buffer().live_exports(), 0);

    let cpu1 = devmm::Device::new(devmm::DeviceType::Cpu, 1);
    let mr = devmm::CallbackMemoryResource::new(
        cpu1,
        8,
        |_, _| Ok(devmm::DevicePtr::from_addr(0x1000)),
        |_, _, _| Ok(()),
    )
    .unwrap();
    let buffer = devmm::DeviceBuffer::new(8, Arc::new(mr), &devmm::Stream::cpu()).unwrap();
    let layout = devmm::Layout::new(&[2], &[1], DType::FLOAT32, 1).unwrap();
    let other = Tensor::from_buffer(Arc::new(buffer), DType::FLOAT32, layout, 0).unwrap();
    let err = other
        .to_dlpack(&DlpackRequest::new().max_version(1, 1))
        .unwrap_err();
    assert!(err.to_string().contains("cpu:1"), "{err}");
    assert_eq!(other.buffer().live_exports(), 0);
}

#[test]
fn a_second_deleter_call_is_a_no_op() {
    // A consumer breaking the protocol: the second call found freed memory
    // and aborted the process with a double free.
    let heap = Arc::new(HeapMemoryResource::new());
    let t = tensor_on(heap, &[3], DType::FLOAT32, RowMajor);
    for request in [DlpackRequest::new(), DlpackRequest::new().max_version(1, 1)] {
        let export = t.to_dlpack(&request).unwrap();
        let flavor = export.flavor();
        let raw = export.into_raw();
        // SAFETY: a live export of `flavor`; its deleter is ours, called
        // twice on purpose (the second call must do nothing).
        unsafe {
            match flavor {
                DlpackFlavor::Versioned => {
                    let m = raw.cast::<ffi::DLManagedTensorVersioned>();
                    let deleter = (*m).deleter.unwrap();
                    deleter(m);
                    assert_eq!(t.buffer().live_exports(), 0);
                    deleter(m);
                }
                DlpackFlavor::Legacy => {
                    let m = raw.cast::<ffi::DLManagedTensor>();
                    let deleter = (*m).deleter.unwrap();
                    deleter(m);
                    assert_eq!(t.buffer().live_exports(), 0);
                    deleter(m);
                }
            }
        }
        assert_eq!(t.buffer().live_exports(), 0);
    }
    assert!(t.buffer().free(t.buffer().stream()).is_ok());
}
