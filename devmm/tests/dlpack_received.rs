//! `ReceivedTensor`: a received `DLManagedTensorVersioned`, owned, whose
//! deleter runs exactly once, read without `unsafe` (run under valgrind by
//! scripts/valgrind.sh).

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

use devmm::dlpack::ffi::{
    DLDataType, DLDevice, DLManagedTensorVersioned, DLPACK_FLAG_BITMASK_READ_ONLY, DLPackVersion,
    DLTensor,
};
use devmm::dlpack::{DlpackRequest, ReceivedTensor};
use devmm::{DType, EmptyOptions, Error, empty};

/// A producer's struct on the heap, its shape with it, and a deleter that
/// counts its calls in the `AtomicUsize` that `manager_ctx` points at.
#[repr(C)]
struct Foreign {
    managed: DLManagedTensorVersioned,
    shape: [i64; 2],
}

unsafe extern "C" fn count_and_free(this: *mut DLManagedTensorVersioned) {
    // SAFETY: `this` is the first field, so the address, of a
    // `Box<Foreign>` (`repr(C)`) made by `foreign`, deleted once.
    let foreign = unsafe { Box::from_raw(this.cast::<Foreign>()) };
    // SAFETY: `manager_ctx` points at the test's counter, alive meanwhile.
    unsafe { &*foreign.managed.manager_ctx.cast::<AtomicUsize>() }.fetch_add(1, Ordering::SeqCst);
}

/// A foreign 2×3 float32 tensor of the given version, without strides.
fn foreign(
    calls: &AtomicUsize,
    version: DLPackVersion,
    ndim: i32,
) -> *mut DLManagedTensorVersioned {
    let boxed = Box::new(Foreign {
        managed: DLManagedTensorVersioned {
            version,
            manager_ctx: std::ptr::from_ref(calls).cast_mut().cast::<c_void>(),
            deleter: Some(count_and_free),
            flags: DLPACK_FLAG_BITMASK_READ_ONLY,
            dl_tensor: DLTensor {
                data: 0x1000 as *mut c_void,
                device: DLDevice {
                    device_type: 2,
                    device_id: 1,
                },
                ndim,
                dtype: DLDataType {
                    code: 2,
                    bits: 32,
                    lanes: 1,
                },
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 16,
            },
        },
        shape: [2, 3],
    });
    let raw = Box::into_raw(boxed);
    // SAFETY: `raw` is the live box just made.
    unsafe { (*raw).managed.dl_tensor.shape = (*raw).shape.as_mut_ptr() };
    raw.cast()
}

const V1: DLPackVersion = DLPackVersion { major: 1, minor: 1 };

#[test]
fn a_foreign_tensor_reads_safely_and_is_deleted_exactly_once() {
    let calls = AtomicUsize::new(0);
    // SAFETY: a fresh struct, handed over; shape lives in its box.
    let received = unsafe { ReceivedTensor::from_raw(foreign(&calls, V1, 2)) }.unwrap();
    assert_eq!(received.shape(), &[2, 3]);
    assert_eq!(received.strides(), None, "left out: compact row-major");
    assert_eq!(
        received.device(),
        DLDevice {
            device_type: 2,
            device_id: 1
        }
    );
    assert_eq!(
        (
            received.dtype().code,
            received.dtype().bits,
            received.dtype().lanes
        ),
        (2, 32, 1)
    );
    assert_eq!(
        (received.data() as usize, received.byte_offset()),
        (0x1000, 16)
    );
    assert!(received.is_read_only());
    assert_eq!(received.version(), V1);
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    drop(received);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "the deleter runs exactly once"
    );
}

#[test]
fn refused_structs_are_deleted_and_null_is_an_error() {
    // SAFETY: null is allowed.
    let null = unsafe { ReceivedTensor::from_raw(std::ptr::null_mut()) }.unwrap_err();
    assert!(matches!(null, Error::Dlpack { .. }), "{null:?}");
    let calls = AtomicUsize::new(0);
    let v2 = DLPackVersion { major: 2, minor: 0 };
    // SAFETY: as above.
    let newer = unsafe { ReceivedTensor::from_raw(foreign(&calls, v2, 2)) }.unwrap_err();
    assert!(newer.to_string().contains("DLPack 2.0"), "{newer}");
    // SAFETY: as above.
    let negative = unsafe { ReceivedTensor::from_raw(foreign(&calls, V1, -1)) }.unwrap_err();
    assert!(negative.to_string().contains("ndim=-1"), "{negative}");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "each refused struct deleted once"
    );
}

#[test]
fn a_devmm_export_is_received_without_unsafe() {
    let t = empty(&[4, 2], DType::INT16, &EmptyOptions::new()).unwrap();
    let received = ReceivedTensor::from_export(
        t.to_dlpack(&DlpackRequest::new().max_version(1, 1))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        (received.shape(), received.strides()),
        (&[4, 2][..], Some(&[2, 1][..]))
    );
    assert_eq!(t.buffer().live_exports(), 1);
    drop(received);
    assert_eq!(t.buffer().live_exports(), 0);
    let legacy = ReceivedTensor::from_export(t.to_dlpack(&DlpackRequest::new()).unwrap());
    assert!(matches!(legacy, Err(Error::Dlpack { .. })), "{legacy:?}");
    assert_eq!(t.buffer().live_exports(), 0, "a refused export is deleted");
}
