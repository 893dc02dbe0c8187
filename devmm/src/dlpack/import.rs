//! DLPack import: a producer's managed tensor (either struct version) held
//! as a devmm [`Tensor`] over foreign memory.
//!
//! The import owns the managed struct from the moment it is called: the
//! producer's deleter runs exactly once, when the last devmm handle (and
//! the last re-export) lets go, or at once when the import is refused.
//! The memory counts as foreign ([`foreign_memory`](crate::foreign_memory))
//! and no devmm resource ever frees it.
//!
//! An import of a devmm export (directly, or through a producer that
//! views one) is the exception: it views the devmm buffer that owns the
//! memory, holding an export of that buffer, and lets the producer go at
//! once, so imports of imports never nest. Deleters that release other
//! imports run one after another, never nested on the stack.

use std::cell::RefCell;
use std::ffi::c_void;
use std::sync::Arc;

use super::ffi::{
    DLManagedTensor, DLManagedTensorVersioned, DLPACK_FLAG_BITMASK_READ_ONLY, DLPACK_MAJOR_VERSION,
    DLTensor,
};
use super::request::DlpackFlavor;
use crate::buffer::DeviceBuffer;
use crate::device::{Device, DeviceType};
use crate::dtype::{DType, DTypeCode};
use crate::error::{Error, Result};
use crate::foreign::ForeignMemoryResource;
use crate::layout::{Dims, Layout};
use crate::ptr::DevicePtr;
use crate::size::{checked_add, checked_mul};
use crate::stream::Stream;
use crate::tensor::Tensor;

/// The producer's managed struct, deleted exactly once when this drops.
struct Managed {
    /// The struct's address (kept as an integer so the owner is `Send`:
    /// DLPack deleters may run on any thread).
    raw: usize,
    flavor: DlpackFlavor,
}

impl Managed {
    /// The struct as the two words of the foreign resource's unboxed
    /// release ([`ForeignMemoryResource::releasing_words`]), which deletes
    /// it through [`Managed::release_words`] instead of this owner.
    fn into_words(self) -> [usize; 2] {
        let words = [
            self.raw,
            usize::from(self.flavor == DlpackFlavor::Versioned),
        ];
        std::mem::forget(self);
        words
    }

    /// Deletes the struct [`into_words`](Managed::into_words) gave up.
    fn release_words([raw, versioned]: [usize; 2]) {
        let flavor = match versioned {
            1 => DlpackFlavor::Versioned,
            _ => DlpackFlavor::Legacy,
        };
        drop(Managed { raw, flavor });
    }
}

impl Drop for Managed {
    fn drop(&mut self) {
        // SAFETY: `raw` is a live managed struct of `flavor` that this
        // owner took from the caller of `from_dlpack`; it is deleted only
        // here, once.
        unsafe { release_iteratively(self.raw, self.flavor) }
    }
}

thread_local! {
    /// Producer deleters waiting for the one running on this thread to
    /// return; `None` while none runs.
    static WAITING: RefCell<Option<Vec<(usize, DlpackFlavor)>>> = const { RefCell::new(None) };
}

/// Runs the deleter of `raw`, or, when one already runs on this thread
/// (the deleter of an import releases what it held, which released
/// another import...), queues it for that one to run once it returns. A
/// chain of imports of producers that hold imports (`np.asarray` of
/// `devmm.from_dlpack` of ..., 100,000 deep) is released one link after
/// another on a flat stack, where each link recursed into the next and
/// overflowed the native stack.
///
/// # Safety
///
/// `raw` is a live managed struct of `flavor`, deleted by nobody else.
unsafe fn release_iteratively(raw: usize, flavor: DlpackFlavor) {
    let queued = WAITING.try_with(|waiting| match waiting.borrow_mut().as_mut() {
        Some(waiting) => {
            waiting.push((raw, flavor));
            true
        }
        None => false,
    });
    if queued == Ok(true) {
        return;
    }
    // Marked running unless the thread is exiting (nothing nests then).
    let _ = WAITING.try_with(|waiting| *waiting.borrow_mut() = Some(Vec::new()));
    let mut next = Some((raw, flavor));
    while let Some((raw, flavor)) = next {
        // SAFETY: `raw` is this call's struct or one a nested call queued,
        // each live and deleted once (the contract of the call that gave it).
        unsafe { run_deleter(raw, flavor) };
        next = WAITING
            .try_with(|waiting| waiting.borrow_mut().as_mut().and_then(Vec::pop))
            .ok()
            .flatten();
    }
    let _ = WAITING.try_with(|waiting| *waiting.borrow_mut() = None);
}

/// Calls the deleter of the managed struct at `raw`.
///
/// # Safety
///
/// As for [`release_iteratively`].
unsafe fn run_deleter(raw: usize, flavor: DlpackFlavor) {
    // SAFETY: the caller's contract. Only the deleter field is read, which
    // sits at the same place in every version with the same major.
    unsafe {
        match flavor {
            DlpackFlavor::Versioned => {
                let m = raw as *mut DLManagedTensorVersioned;
                if let Some(deleter) = (*m).deleter {
                    deleter(m);
                }
            }
            DlpackFlavor::Legacy => {
                let m = raw as *mut DLManagedTensor;
                if let Some(deleter) = (*m).deleter {
                    deleter(m);
                }
            }
        }
    }
}

/// The integer a consumer passes as `__dlpack__(stream=...)` so the
/// producer orders its work before `stream`: `None` on host devices (the
/// protocol wants no stream there), the handle on ROCm with the per-thread
/// stream spelled 0 (the protocol reserves 2 there), and on CUDA the handle
/// with the default stream spelled 1 (the protocol forbids 0).
///
/// ```
/// assert_eq!(devmm::dlpack::consumer_stream_value(&devmm::Stream::cpu()), None);
/// ```
pub fn consumer_stream_value(stream: &Stream) -> Option<i64> {
    let handle = stream.handle();
    let value = match stream.device().ty() {
        DeviceType::Cuda | DeviceType::CudaManaged => {
            if handle == 0 {
                1
            } else {
                handle
            }
        }
        DeviceType::Rocm => crate::runtime::rocm::stream::consumer_value(handle),
        _ => return None,
    };
    i64::try_from(value).ok()
}

fn refusal(reason: String) -> Error {
    Error::Dlpack { reason }
}

impl Tensor {
    /// Imports a DLPack managed tensor of either struct version, zero-copy,
    /// with the device's default stream as the buffer's stream.
    ///
    /// ```
    /// use devmm::dlpack::{DlpackFlavor, DlpackRequest};
    /// use devmm::{empty, DType, EmptyOptions, Tensor};
    /// let source = empty(&[2, 3], DType::FLOAT32, &EmptyOptions::new())?;
    /// let raw = source.to_dlpack(&DlpackRequest::new().max_version(1, 1))?.into_raw();
    /// // SAFETY: a live versioned export, handed over once.
    /// let imported = unsafe { Tensor::from_dlpack(raw, DlpackFlavor::Versioned) }?;
    /// assert_eq!((imported.shape(), imported.data_ptr()), (source.shape(), source.data_ptr()));
    /// assert_eq!(source.buffer().live_exports(), 1);
    /// drop(imported); // the producer's deleter runs now
    /// assert_eq!(source.buffer().live_exports(), 0);
    /// # Ok::<(), devmm::Error>(())
    /// ```
    ///
    /// # Safety
    ///
    /// `raw` is null or a live `DLManagedTensorVersioned` (for
    /// [`DlpackFlavor::Versioned`]) or `DLManagedTensor` (legacy) that the
    /// caller owns and hands over: nobody else may call its deleter. Its
    /// `dl_tensor` must describe memory that stays valid until the deleter runs.
    pub unsafe fn from_dlpack(raw: *mut c_void, flavor: DlpackFlavor) -> Result<Tensor> {
        // SAFETY: forwarded from the caller.
        unsafe { import(raw, flavor, None, None) }
    }

    /// [`from_dlpack`](Self::from_dlpack), with `stream` as the buffer's
    /// stream: the consumer stream passed to the producer's `__dlpack__`.
    ///
    /// # Safety
    ///
    /// As for [`from_dlpack`](Self::from_dlpack).
    pub unsafe fn from_dlpack_on(
        raw: *mut c_void,
        flavor: DlpackFlavor,
        stream: &Stream,
    ) -> Result<Tensor> {
        // SAFETY: forwarded from the caller.
        unsafe { import(raw, flavor, Some(stream), None) }
    }

    /// [`from_dlpack`](Self::from_dlpack) (on `stream` when given) of a
    /// producer that views the memory of `origin`, a managed struct the
    /// producer itself imported (NumPy's array made by `np.from_dlpack`
    /// keeps it in its `base`). When `origin` is a devmm export, the import
    /// takes that export's buffer directly and lets go of `raw` (and so of
    /// the producer) at once: a chain of imports through such producers
    /// never nests.
    ///
    /// # Safety
    ///
    /// As for [`from_dlpack`](Self::from_dlpack); `origin` is a live
    /// managed struct of `origin_flavor` that stays live during the call
    /// and is not handed over.
    pub unsafe fn from_dlpack_viewing(
        raw: *mut c_void,
        flavor: DlpackFlavor,
        stream: Option<&Stream>,
        origin: *mut c_void,
        origin_flavor: DlpackFlavor,
    ) -> Result<Tensor> {
        // SAFETY: forwarded from the caller.
        unsafe { import(raw, flavor, stream, Some((origin, origin_flavor))) }
    }
}

/// # Safety
///
/// As for [`Tensor::from_dlpack`].
unsafe fn import(
    raw: *mut c_void,
    flavor: DlpackFlavor,
    stream: Option<&Stream>,
    origin: Option<(*mut c_void, DlpackFlavor)>,
) -> Result<Tensor> {
    if raw.is_null() {
        return Err(refusal(
            "cannot import a null DLPack managed tensor; pass the pointer the producer handed out"
                .into(),
        ));
    }
    // From here on every return path deletes the struct exactly once:
    // errors drop `managed`, success moves it into the buffer's release.
    let managed = Managed {
        raw: raw as usize,
        flavor,
    };
    // SAFETY: the caller hands over a live struct of `flavor`.
    let (dl_tensor, read_only): (&DLTensor, bool) = unsafe {
        match flavor {
            DlpackFlavor::Versioned => {
                let m = &*raw.cast::<DLManagedTensorVersioned>();
                if m.version.major != DLPACK_MAJOR_VERSION {
                    return Err(refusal(format!(
                        "the producer made a DLPack {}.{} struct, but devmm reads major version \
                         {DLPACK_MAJOR_VERSION}; ask the producer for max_version=(1, 1)",
                        m.version.major, m.version.minor
                    )));
                }
                (&m.dl_tensor, m.flags & DLPACK_FLAG_BITMASK_READ_ONLY != 0)
            }
            DlpackFlavor::Legacy => (&(*raw.cast::<DLManagedTensor>()).dl_tensor, false),
        }
    };
    // SAFETY: `dl_tensor` belongs to the live struct; its shape and strides
    // arrays hold `ndim` values by the DLPack contract.
    let described = unsafe { describe(dl_tensor) }?;
    let stream = match stream {
        Some(stream) => {
            stream.check_device(described.device)?;
            stream.clone()
        }
        None => crate::defaults::stream(described.device)?,
    };
    // SAFETY: `raw` is live (the caller's contract) and so is `origin`.
    let exported = unsafe {
        super::export::exported_tensor(raw, flavor).or_else(|| {
            origin.and_then(|(origin, flavor)| super::export::exported_tensor(origin, flavor))
        })
    };
    if let Some(exported) = exported
        && let Some(tensor) = view_export(&exported, &described, read_only, &stream)?
    {
        // The memory is held through its devmm buffer now: the producer's
        // struct (and whatever it keeps alive) goes at once.
        drop(managed);
        return Ok(tensor);
    }
    let owner = match flavor {
        DlpackFlavor::Versioned => "DLPack import (versioned)",
        DlpackFlavor::Legacy => "DLPack import (legacy)",
    };
    // The resource's release deletes the struct from here on, also when
    // the adoption below fails.
    let resource = ForeignMemoryResource::releasing_words(
        described.device,
        owner,
        Managed::release_words,
        managed.into_words(),
    );
    // A producer reuses its memory as soon as its deleter runs (PyTorch's
    // and CuPy's caching allocators do), ordered after nothing devmm
    // queued: on a device with streams, the release first waits for the
    // buffer's stream.
    let resource = match described.device.ty() {
        DeviceType::Cpu => resource,
        _ => resource.synchronizing(),
    };
    let (ptr, nbytes, offset) = if described.layout.required_nbytes() == 0 {
        (DevicePtr::NULL, 0, 0)
    } else {
        let nbytes = checked_add(
            described.byte_offset,
            described.layout.required_nbytes(),
            "DLPack import extent",
        )?;
        (described.data, nbytes, described.byte_offset)
    };
    let mut buffer = DeviceBuffer::adopt(ptr, nbytes, resource, &stream)?;
    if read_only {
        // The producer lent the memory read-only: the buffer refuses writes,
        // not only the tensor (`t.buffer.copy_from_host` wrote through it).
        buffer = buffer.into_read_only();
    }
    Tensor::from_buffer(
        std::sync::Arc::new(buffer),
        described.dtype,
        described.layout,
        offset,
    )
}

/// The import of `described`, memory of the devmm export of `exported`,
/// as a view of the buffer that owns that memory, held by an export of
/// its own: an import of an import of ... a devmm buffer holds that buffer
/// directly, so releasing any of them never recurses. `None` (import as
/// foreign memory instead) when the owner was freed already, or
/// `described` is not inside its memory.
fn view_export(
    exported: &Tensor,
    described: &Described,
    read_only: bool,
    stream: &Stream,
) -> Result<Option<Tensor>> {
    let origin = Arc::clone(exported.buffer().origin());
    let start = origin.ptr().addr();
    let data = described.data.addr();
    let needed = described.layout.required_nbytes();
    let offset = match needed {
        // An empty view addresses nothing, wherever its pointer is.
        0 => 0,
        _ => match data
            .checked_add(described.byte_offset)
            .and_then(|first| first.checked_sub(start))
        {
            Some(offset)
                if offset
                    .checked_add(needed)
                    .is_some_and(|end| end <= origin.nbytes()) =>
            {
                offset
            }
            _ => return Ok(None),
        },
    };
    if described.device != origin.device() || origin.acquire_export().is_err() {
        return Ok(None);
    }
    let held = Arc::clone(&origin);
    let ordered_after = (stream != origin.stream()).then(|| stream.clone());
    let resource = ForeignMemoryResource::new(
        origin.device(),
        "DLPack import of a devmm export",
        move || {
            if !held.release_export_after(ordered_after.as_ref()) {
                // Unordered, the release could free memory the consumer
                // still reads: the buffer is kept for the process's life.
                std::mem::forget(held);
            }
        },
    );
    // A failed adoption drops the resource, whose release ends the export.
    let mut buffer = DeviceBuffer::adopt(origin.ptr(), origin.nbytes(), resource, stream)?
        .viewing(Arc::clone(&origin));
    if read_only || exported.is_read_only() || origin.is_read_only() {
        buffer = buffer.into_read_only();
    }
    let layout = described.layout.clone();
    Tensor::from_buffer(Arc::new(buffer), described.dtype, layout, offset).map(Some)
}

/// What a `DLTensor` describes, checked.
struct Described {
    device: Device,
    dtype: DType,
    layout: Layout,
    data: DevicePtr,
    byte_offset: usize,
}

/// Reads and checks a producer's `DLTensor`.
///
/// # Safety
///
/// `t` is a live `DLTensor` whose `shape` (and non-null `strides`) point at
/// `ndim` values.
unsafe fn describe(t: &DLTensor) -> Result<Described> {
    // SAFETY: forwarded from the caller.
    let Header {
        device,
        dtype,
        shape,
    } = unsafe { header(t) }?;
    // An empty tensor addresses no element, so its strides mean nothing:
    // producers send anything there (NumPy sends zeros), and devmm reads
    // them as row-major.
    let strides = if t.strides.is_null() || shape.contains(&0) {
        c_contiguous(&shape)?
    } else {
        let mut strides = Dims::new();
        for (i, &extent) in shape.iter().enumerate() {
            // SAFETY: non-null `strides` holds `ndim` values.
            let stride = unsafe { *t.strides.add(i) };
            strides.push(match usize::try_from(stride) {
                Ok(s) if s > 0 => s,
                // Extents of 0 or 1 never step, so their stride is free.
                _ if extent <= 1 => 1,
                _ => {
                    return Err(refusal(format!(
                        "stride {stride} of dimension {i} is not positive; devmm tensors are \
                         storage and cannot broadcast or run backwards: import a contiguous copy \
                         (np.ascontiguousarray, torch.contiguous)"
                    )));
                }
            });
        }
        strides
    };
    let layout = Layout::from_dims(shape, strides, dtype, 1)?;
    let byte_offset = usize::try_from(t.byte_offset)
        .map_err(|_| refusal(format!("DLPack byte_offset {} overflows", t.byte_offset)))?;
    let data = DevicePtr::from_addr(t.data as usize);
    if layout.required_nbytes() > 0 && data.is_null() {
        return Err(refusal(format!(
            "the DLPack tensor has {} elements but a null data pointer",
            layout.numel()
        )));
    }
    Ok(Described {
        device,
        dtype,
        layout,
        data,
        byte_offset,
    })
}

/// What every `DLTensor` says besides its memory: the device, the element
/// type and the shape, checked.
pub(super) struct Header {
    pub(super) device: Device,
    pub(super) dtype: DType,
    pub(super) shape: Dims,
}

/// Reads and checks the device, dtype and shape of `t` (all an exchange
/// API allocator's prototype gives).
///
/// # Safety
///
/// `t.shape`, when not null, points at `t.ndim` values.
pub(super) unsafe fn header(t: &DLTensor) -> Result<Header> {
    let (dev_ty, dev_id) = (t.device.device_type, t.device.device_id);
    let device = Device::from_dlpack(dev_ty, dev_id).map_err(|e| {
        refusal(format!(
            "cannot import memory on DLPack device ({dev_ty}, {dev_id}): {e}"
        ))
    })?;
    let code = DTypeCode::from_dlpack(t.dtype.code).ok_or_else(|| {
        refusal(format!(
            "DLPack dtype code {} is not one devmm knows; import int, uint, float, bfloat, \
             complex or bool data",
            t.dtype.code
        ))
    })?;
    let dtype = DType::new(code, t.dtype.bits, t.dtype.lanes)?;
    let ndim = usize::try_from(t.ndim)
        .map_err(|_| refusal(format!("DLPack ndim {} is negative", t.ndim)))?;
    if ndim > 0 && t.shape.is_null() {
        return Err(refusal(format!(
            "the DLPack tensor has {ndim} dimensions but a null shape"
        )));
    }
    // A loop, not a collect of results: an import makes this list each
    // time, and the adapters cost it about a hundred instructions more.
    let mut shape = Dims::with_capacity(ndim);
    for i in 0..ndim {
        // SAFETY: `shape` holds `ndim` values (caller's contract, null checked).
        let v = unsafe { *t.shape.add(i) };
        let extent =
            usize::try_from(v).map_err(|_| refusal(format!("DLPack extent {v} is negative")))?;
        shape.push(extent);
    }
    if device.ty() == DeviceType::Cpu && dev_id != 0 {
        return Err(refusal(format!(
            "DLPack cpu device id {dev_id}: host memory has device id 0"
        )));
    }
    Ok(Header {
        device,
        dtype,
        shape,
    })
}

/// Row-major strides for a producer that sent none.
fn c_contiguous(shape: &[usize]) -> Result<Dims> {
    let mut strides: Dims = smallvec::smallvec![1; shape.len()];
    let mut next = 1usize;
    for (stride, &extent) in strides.iter_mut().zip(shape).rev() {
        *stride = next;
        next = checked_mul(next, extent.max(1), "DLPack strides")?;
    }
    Ok(strides)
}
