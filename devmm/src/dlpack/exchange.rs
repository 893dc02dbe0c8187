//! The rules behind DLPack 1.3's C exchange API ([`DLPackExchangeAPI`]):
//! what its allocator makes, what its exports and borrowed descriptions
//! say, and which stream is a device's current work stream. The binding
//! owns the table and the Python objects; every decision is here.
//!
//! Exchange exports are the same zero-copy exports as `__dlpack__`'s (one
//! block, one deleter, the same quarantine), stamped with the version
//! devmm's managed struct has, and ask for no stream ordering: the
//! consumer orders its work after [`current_work_stream`] itself, so an
//! export first makes that stream wait for the tensor's own.
//!
//! [`DLPackExchangeAPI`]: super::ffi::DLPackExchangeAPI

use super::DlpackRequest;
use super::export::DlpackExport;
use super::ffi::{DLDataType, DLDevice, DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION, DLTensor};
use super::import::{Header, header};
use crate::device::{Device, DeviceType};
use crate::error::{Error, Result};
use crate::stream::Stream;
use crate::tensor::{EmptyOptions, Tensor, empty};

/// What an exchange consumer asks of an export: the versioned struct, and
/// no stream ordering (`NoSync`: `-1` in the Python protocol's words).
const NO_SYNC: DlpackRequest = DlpackRequest::new()
    .max_version(DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION)
    .stream(-1);

fn refusal(reason: String) -> Error {
    Error::Dlpack { reason }
}

/// `managed_tensor_allocator`: a new row-major tensor with `prototype`'s
/// dtype, shape and device, allocated through that device's current
/// resource on its default stream, exported as a versioned managed tensor
/// (its deleter frees the memory once the consumer lets go). The
/// prototype's data, strides and byte offset are not read.
///
/// ```
/// use devmm::dlpack::ffi::{DLDataType, DLDevice, DLTensor};
/// let mut shape = [2i64, 3];
/// let prototype = DLTensor {
///     data: std::ptr::null_mut(),
///     device: DLDevice { device_type: 1, device_id: 0 },
///     ndim: 2,
///     dtype: DLDataType { code: 2, bits: 32, lanes: 1 },
///     shape: shape.as_mut_ptr(),
///     strides: std::ptr::null_mut(),
///     byte_offset: 0,
/// };
/// // SAFETY: `shape` holds `ndim` values and outlives the call.
/// let made = unsafe { devmm::dlpack::allocate_like(&prototype) }?;
/// assert_eq!((made.shape(), made.strides()), (&[2, 3][..], &[3, 1][..]));
/// # Ok::<(), devmm::Error>(())
/// ```
///
/// # Safety
///
/// `prototype.shape`, when not null, points at `prototype.ndim` values.
pub unsafe fn allocate_like(prototype: &DLTensor) -> Result<DlpackExport> {
    // SAFETY: forwarded from the caller.
    let Header {
        device,
        dtype,
        shape,
    } = unsafe { header(prototype) }?;
    empty(&shape, dtype, &EmptyOptions::new().device(device))?.to_dlpack(&NO_SYNC)
}

/// `current_work_stream`: the native handle of the stream devmm queues
/// work on for the DLPack device `(device_type, device_id)` when none is
/// named (its runtime's default stream), or `None` on the host, which
/// has no streams.
///
/// ```
/// assert_eq!(devmm::dlpack::current_work_stream(1, 0)?, None); // kDLCPU
/// # Ok::<(), devmm::Error>(())
/// ```
pub fn current_work_stream(device_type: i32, device_id: i32) -> Result<Option<usize>> {
    Ok(current_stream(device_type, device_id)?.map(|stream| stream.handle()))
}

/// The stream [`current_work_stream`] names for a DLPack device.
fn current_stream(device_type: i32, device_id: i32) -> Result<Option<Stream>> {
    let device = Device::from_dlpack(device_type, device_id).map_err(|e| {
        refusal(format!(
            "no current work stream for DLPack device ({device_type}, {device_id}): {e}"
        ))
    })?;
    match device.ty() {
        DeviceType::Cpu => Ok(None),
        _ => Ok(Some(crate::runtime::stream_for(device, None)?)),
    }
}

impl Tensor {
    /// Exports the tensor for a C exchange consumer
    /// (`managed_tensor_from_py_object_no_sync`): [`to_dlpack`](Self::to_dlpack)
    /// of the versioned struct. The consumer orders its work after
    /// [`current_work_stream`] itself, so the export is made as for a
    /// `__dlpack__` consumer naming that stream: it first waits for the
    /// tensor's own stream, and the release waits for what the consumer
    /// queued there (pinned memory, which names no stream, has its stream
    /// synchronized instead). Refusals are those of `to_dlpack` (a freed
    /// buffer, extents beyond int64).
    ///
    /// ```
    /// let t = devmm::empty(&[4], devmm::DType::INT8, &devmm::EmptyOptions::new())?;
    /// let export = t.to_dlpack_no_sync()?;
    /// assert_eq!(export.version(), Some((1, 1)));
    /// assert_eq!(t.buffer().live_exports(), 1);
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn to_dlpack_no_sync(&self) -> Result<DlpackExport> {
        let current = self.current_work_stream()?;
        match current.as_ref().and_then(super::consumer_stream_value) {
            Some(value) => self.to_dlpack(&NO_SYNC.stream(value)),
            None => {
                super::export::hand_off(current.as_ref(), self.buffer().stream())?;
                self.to_dlpack(&NO_SYNC)
            }
        }
    }

    /// The stream an exchange consumer orders its work after for this
    /// tensor's device ([`current_work_stream`]); `None` on the host, which
    /// has no streams (asked nothing there).
    fn current_work_stream(&self) -> Result<Option<Stream>> {
        if self.device().ty() == DeviceType::Cpu {
            return Ok(None);
        }
        let (device_type, device_id) = self.device().dlpack_device();
        current_stream(device_type, device_id)
    }

    /// Describes the tensor in a `DLTensor` that borrows its shape and
    /// strides from `self` (`dltensor_from_py_object_no_sync`): valid
    /// while `self` is neither moved nor dropped, and no export holds the
    /// memory; the device's [`current_work_stream`] waits for the tensor's
    /// own first, as for an export. Refused ([`Error::Dlpack`]) for a freed buffer, for a
    /// read-only tensor (a bare `DLTensor` has no read-only flag), and for
    /// extents or strides beyond int64.
    ///
    /// ```
    /// let t = devmm::empty(&[2, 5], devmm::DType::UINT16, &devmm::EmptyOptions::new())?;
    /// let view = t.dl_tensor_view()?;
    /// assert_eq!(view.ndim, 2);
    /// // SAFETY: `t` is alive and unmoved, so its dims are.
    /// assert_eq!(unsafe { *view.strides }, 5);
    /// assert!(t.to_read_only().dl_tensor_view().is_err());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn dl_tensor_view(&self) -> Result<DLTensor> {
        let buffer = self.buffer();
        if buffer.is_closed() {
            return Err(super::request::freed_refusal(self));
        }
        if self.is_read_only() {
            return Err(refusal(
                "the tensor is read-only, and a borrowed DLTensor cannot say so; export it \
                 with managed_tensor_from_py_object_no_sync (or __dlpack__), whose versioned \
                 struct carries the read-only flag"
                    .into(),
            ));
        }
        let (shape, strides) = (self.shape(), self.strides());
        // The dims are lent in place: that needs them to be int64 already,
        // which a `usize` is on 64-bit targets when its top bit is clear.
        let lendable = size_of::<usize>() == size_of::<i64>()
            && shape
                .iter()
                .chain(strides)
                .all(|&v| i64::try_from(v).is_ok());
        if !lendable {
            return Err(refusal(format!(
                "the tensor's extents {shape:?} or strides {strides:?} are not int64 values \
                 devmm can lend in place; export it with managed_tensor_from_py_object_no_sync"
            )));
        }
        let ndim = i32::try_from(shape.len()).map_err(|_| {
            refusal(format!(
                "a tensor of {} dimensions does not fit DLPack's int32 ndim",
                shape.len()
            ))
        })?;
        super::export::hand_off(self.current_work_stream()?.as_ref(), buffer.stream())?;
        let dtype = self.dtype();
        let (device_type, device_id) = self.device().dlpack_device();
        Ok(DLTensor {
            data: self.data_ptr().as_host_ptr(),
            device: DLDevice {
                device_type,
                device_id,
            },
            ndim,
            dtype: DLDataType {
                code: dtype.code() as u8,
                bits: dtype.bits(),
                lanes: dtype.lanes(),
            },
            // Lent, never written through: DLPack's `int64_t *` is not const.
            shape: shape.as_ptr().cast::<i64>().cast_mut(),
            strides: strides.as_ptr().cast::<i64>().cast_mut(),
            byte_offset: 0,
        })
    }
}
