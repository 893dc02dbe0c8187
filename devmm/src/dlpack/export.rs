//! The owned export: one heap block per export, and the deleter that frees it.
//!
//! The block is `Block<M>` (the managed struct first, so the consumer's
//! pointer is the block's address, then the tensor clone that keeps the
//! memory alive) followed by `ndim` shape and `ndim` stride values. The
//! deleter reads the allocation layout back from the block, frees it, and
//! ends the export on the buffer, which releases a freed buffer's memory
//! once its last export is gone.

use std::alloc::Layout as AllocLayout;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::ffi::c_void;
use std::fmt;
use std::mem::ManuallyDrop;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use super::ffi::{
    DLDataType, DLDevice, DLManagedTensor, DLManagedTensorVersioned, DLPACK_FLAG_BITMASK_READ_ONLY,
    DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION, DLPackVersion, DLTensor,
};
use super::request::{DlpackFlavor, DlpackRequest, freed_refusal};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::stream::Stream;
use crate::tensor::Tensor;

/// The two managed structs, as the block builder and the deleter see them.
trait ManagedStruct: Sized {
    fn new(dl_tensor: DLTensor, manager_ctx: *mut c_void, flags: u64) -> Self;
    fn dl_tensor(&self) -> &DLTensor;
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)>;
}

impl ManagedStruct for DLManagedTensorVersioned {
    fn new(dl_tensor: DLTensor, manager_ctx: *mut c_void, flags: u64) -> Self {
        DLManagedTensorVersioned {
            version: DLPackVersion {
                major: DLPACK_MAJOR_VERSION,
                minor: DLPACK_MINOR_VERSION,
            },
            manager_ctx,
            deleter: Some(delete::<DLManagedTensorVersioned>),
            flags,
            dl_tensor,
        }
    }

    fn dl_tensor(&self) -> &DLTensor {
        &self.dl_tensor
    }

    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)> {
        self.deleter
    }
}

impl ManagedStruct for DLManagedTensor {
    /// Legacy consumers get no flags: read-only tensors refuse them earlier.
    fn new(dl_tensor: DLTensor, manager_ctx: *mut c_void, _flags: u64) -> Self {
        DLManagedTensor {
            dl_tensor,
            manager_ctx,
            deleter: Some(delete::<DLManagedTensor>),
        }
    }

    fn dl_tensor(&self) -> &DLTensor {
        &self.dl_tensor
    }

    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)> {
        self.deleter
    }
}

/// The tensor a devmm export (of `flavor`, at `raw`) exports, or `None`
/// for any other producer's managed tensor, or an export already deleted.
///
/// # Safety
///
/// `raw` is a live managed struct of `flavor`.
pub(super) unsafe fn exported_tensor(raw: *mut c_void, flavor: DlpackFlavor) -> Option<Tensor> {
    /// The block's owner when `raw`'s deleter is ours and `manager_ctx` its
    /// own address, as `build` leaves every export.
    ///
    /// # Safety
    ///
    /// As for `exported_tensor`.
    unsafe fn owner<M: ManagedStruct>(raw: *mut c_void, ctx: *mut c_void) -> Option<Tensor> {
        let managed = raw.cast::<M>();
        // SAFETY: a live struct of `M` (the caller's contract).
        let deleter = unsafe { (*managed).deleter() }?;
        let ours: unsafe extern "C" fn(*mut M) = delete::<M>;
        if !std::ptr::fn_addr_eq(deleter, ours) || ctx != raw {
            return None;
        }
        let block = managed.cast::<Block<M>>();
        // SAFETY: our deleter and our context make `raw` the head of a
        // `Block<M>`; its owner is set until the deleter takes it, which
        // sets `deleted` first.
        unsafe { (!(*block).deleted.load(Ordering::Acquire)).then(|| (*(*block).owner).clone()) }
    }
    // SAFETY: forwarded; `manager_ctx` is read from the live struct.
    unsafe {
        match flavor {
            DlpackFlavor::Versioned => {
                let ctx = (*raw.cast::<DLManagedTensorVersioned>()).manager_ctx;
                owner::<DLManagedTensorVersioned>(raw, ctx)
            }
            DlpackFlavor::Legacy => {
                let ctx = (*raw.cast::<DLManagedTensor>()).manager_ctx;
                owner::<DLManagedTensor>(raw, ctx)
            }
        }
    }
}

/// Runs the deleter stored in the struct, as a consumer would.
///
/// # Safety
///
/// `this` is a live export that nobody else will delete.
unsafe fn run_deleter<M: ManagedStruct>(this: *mut M) {
    // SAFETY: the caller guarantees `this` is live.
    if let Some(deleter) = unsafe { (*this).deleter() } {
        // SAFETY: called once, on the struct it belongs to.
        unsafe { deleter(this) };
    }
}

/// The head of an export's heap block; shape and strides follow it.
#[repr(C)]
struct Block<M> {
    /// First field of a `repr(C)` struct: its address is the block's.
    managed: M,
    /// Keeps the buffer, and through it the resource chain, alive.
    owner: ManuallyDrop<Tensor>,
    /// The consumer's stream named at export time: the release is ordered
    /// after the work the consumer queued there.
    consumer: ManuallyDrop<Option<Stream>>,
    /// What the producer asked the export to keep alive too
    /// ([`DlpackExport::hold`]).
    held: ManuallyDrop<Option<ExportOwner>>,
    /// The block's allocation layout, for the deleter.
    layout: AllocLayout,
    /// Set by the first deleter call: a second call (a consumer breaking
    /// the protocol) finds it set and does nothing.
    deleted: AtomicBool,
}

impl<M> Block<M> {
    /// Shape and strides start right after the head, so the head must end
    /// on an `i64` boundary and be at least as aligned.
    const DIMS_ALIGNED: () = assert!(
        size_of::<Block<M>>().is_multiple_of(align_of::<i64>())
            && align_of::<Block<M>>() >= align_of::<i64>()
    );

    /// The allocation for a block of `ndim` dimensions: the head, then
    /// `ndim` extents and `ndim` strides. `None` when it overflows.
    fn layout(ndim: usize) -> Option<AllocLayout> {
        let dims = ndim.checked_mul(2 * size_of::<i64>())?;
        let size = size_of::<Block<M>>().checked_add(dims)?;
        AllocLayout::from_size_align(size, align_of::<Block<M>>()).ok()
    }
}

/// Allocates and fills one block for `tensor` (on `device`); the buffer's
/// export count must already include it.
///
/// Inlined into `to_dlpack` (once per flavour): as a call it cost a second
/// frame, the spills of both, and its `Result` written through memory,
/// 28 of the export's 508 instructions (issue #16).
#[inline(always)]
fn build<M: ManagedStruct>(
    tensor: &Tensor,
    device: Device,
    flags: u64,
    consumer: Option<Stream>,
) -> Result<NonNull<M>> {
    let (shape, strides) = (tensor.shape(), tensor.strides());
    let ndim = shape.len();
    let ndim_c = i32::try_from(ndim).map_err(|_| {
        Error::layout(format!(
            "a tensor of {ndim} dimensions does not fit DLPack's int32 ndim"
        ))
    })?;
    let () = Block::<M>::DIMS_ALIGNED;
    let layout = Block::<M>::layout(ndim).ok_or_else(|| {
        Error::layout("the DLPack export block overflows isize; use fewer dimensions")
    })?;
    // SAFETY: the layout is non-zero-sized (it holds a `Block<M>`).
    let raw = reused(layout).unwrap_or_else(|| unsafe { std::alloc::alloc(layout) });
    let Some(block) = NonNull::new(raw.cast::<Block<M>>()) else {
        return Err(Error::OutOfMemory {
            device: Device::CPU,
            nbytes: layout.size(),
            chain: "DLPack export block (Rust global allocator)".into(),
            detail: None,
            pool: None,
        });
    };
    // SAFETY: the dims start where the head ends, inside the block (see
    // `Block::layout`) and aligned for i64 (`DIMS_ALIGNED`).
    let dims_ptr = unsafe { raw.add(size_of::<Block<M>>()) }.cast::<i64>();
    // Written in one pass and checked after: a value fits int64 unless its
    // top bit is set, so OR-ing them all answers for every one at once.
    let mut all_bits = 0usize;
    for (i, (&extent, &stride)) in shape.iter().zip(strides).enumerate() {
        all_bits |= extent | stride;
        // SAFETY: `i < ndim` and `ndim + i < 2 * ndim`: both writes stay
        // inside the block's dims.
        unsafe {
            dims_ptr.add(i).write(extent as i64);
            dims_ptr.add(ndim + i).write(stride as i64);
        }
    }
    if i64::try_from(all_bits).is_err() {
        // SAFETY: allocated above with `layout`; nothing else points at it.
        unsafe { std::alloc::dealloc(raw, layout) };
        let v = shape
            .iter()
            .chain(strides)
            .find(|&&v| i64::try_from(v).is_err())
            .map_or(all_bits, |&v| v);
        // A DLPack refusal (a `BufferError` in Python, as the protocol
        // asks), not a bad layout: devmm holds the tensor fine.
        return Err(Error::Dlpack {
            reason: format!(
                "extent or stride {v} does not fit DLPack's int64; use a smaller shape"
            ),
        });
    }
    let dtype = tensor.dtype();
    let (device_type, device_id) = device.dlpack_device();
    let dl_tensor = DLTensor {
        data: tensor.data_ptr().as_host_ptr(),
        device: DLDevice {
            device_type,
            device_id,
        },
        ndim: ndim_c,
        dtype: DLDataType {
            code: dtype.code() as u8,
            bits: dtype.bits(),
            lanes: dtype.lanes(),
        },
        shape: dims_ptr,
        // SAFETY: `ndim <= 2 * ndim`, so this stays inside (or one past) the dims.
        strides: unsafe { dims_ptr.add(ndim) },
        byte_offset: 0,
    };
    let head = block.as_ptr();
    // SAFETY: `block` is freshly allocated with room and alignment for a
    // `Block<M>`; each field is written once, in place (a whole `Block`
    // built first would be copied into the heap).
    unsafe {
        (&raw mut (*head).managed).write(M::new(dl_tensor, raw.cast(), flags));
        (&raw mut (*head).owner).write(ManuallyDrop::new(tensor.clone()));
        (&raw mut (*head).consumer).write(ManuallyDrop::new(consumer));
        (&raw mut (*head).held).write(ManuallyDrop::new(None));
        (&raw mut (*head).layout).write(layout);
        (&raw mut (*head).deleted).write(AtomicBool::new(false));
    }
    Ok(block.cast())
}

/// How many deleted blocks [`retire`] keeps allocated before freeing or
/// reusing the oldest: a consumer that calls a deleter twice (a protocol
/// violation) within this many deletions on the deleting thread finds the
/// block still there, marked deleted.
const QUARANTINE: usize = 256;

/// Deleted blocks not yet freed, oldest first, and a thread's own.
struct Quarantine(VecDeque<Retired>);

/// A deleted block and its layout. Kept as a pointer, not an address, so
/// the blocks stay reachable from their [`Quarantine`] (leak checkers such
/// as miri's and valgrind's see them held, not lost).
struct Retired(NonNull<u8>, AllocLayout);

// SAFETY: a retired block is only read by a repeated deleter call (through
// its own pointer, on any thread, as DLPack deleters may run) and freed or
// reused once, by whichever thread pops it from its quarantine.
unsafe impl Send for Retired {}

impl Quarantine {
    /// Adds a deleted block; returns the oldest once more than
    /// [`QUARANTINE`] wait (one past it is kept for [`Quarantine::reuse`]).
    fn push(&mut self, block: Retired) -> Option<Retired> {
        self.0.push_back(block);
        (self.0.len() > QUARANTINE + 1)
            .then(|| self.0.pop_front())
            .flatten()
    }

    /// The oldest block, when it is past the quarantine and has `layout`.
    fn reuse(&mut self, layout: AllocLayout) -> Option<NonNull<u8>> {
        let past = self.0.len() > QUARANTINE && self.0.front().is_some_and(|b| b.1 == layout);
        past.then(|| self.0.pop_front())
            .flatten()
            .map(|Retired(block, _)| block)
    }
}

impl Drop for Quarantine {
    /// A thread that ends frees the blocks it quarantined.
    fn drop(&mut self) {
        for Retired(block, layout) in self.0.drain(..) {
            // SAFETY: a retired block, allocated with `layout` and held
            // only by this quarantine, so freed once.
            unsafe { std::alloc::dealloc(block.as_ptr(), layout) };
        }
    }
}

thread_local! {
    /// The blocks this thread's deleters retired. Per thread, as exports
    /// mostly die on the thread that made them: no lock, and the thread's
    /// next export takes its oldest block instead of a fresh allocation.
    static RETIRED: RefCell<Quarantine> = const { RefCell::new(Quarantine(VecDeque::new())) };
}

/// Where deleters retire blocks while their thread's quarantine is gone
/// (a deleter run by another thread-local's destructor at thread exit).
static RETIRED_LATE: Mutex<Quarantine> = Mutex::new(Quarantine(VecDeque::new()));

/// A block of `layout` from this thread's quarantine, past it, to build an
/// export in instead of allocating one.
fn reused(layout: AllocLayout) -> Option<*mut u8> {
    RETIRED
        .try_with(|retired| retired.borrow_mut().reuse(layout))
        .ok()
        .flatten()
        .map(NonNull::as_ptr)
}

/// Frees the block at `block` once [`QUARANTINE`] later blocks were
/// deleted on this thread (or hands it to the thread's next export of the
/// same layout), instead of at once, so that a second deleter call soon
/// after the first reads a block marked deleted rather than freed memory
/// (which aborted the process with a double free).
///
/// # Safety
///
/// `block` was allocated with `layout`, its deleter has run, and nothing
/// but a repeated deleter call reads it again.
unsafe fn retire(block: NonNull<u8>, layout: AllocLayout) {
    let oldest = match RETIRED.try_with(|q| q.borrow_mut().push(Retired(block, layout))) {
        Ok(oldest) => oldest,
        Err(_) => RETIRED_LATE
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Retired(block, layout)),
    };
    if let Some(Retired(block, layout)) = oldest {
        // SAFETY: a retired block, allocated with `layout` (this function's
        // contract) and retired once, so freed once.
        unsafe { std::alloc::dealloc(block.as_ptr(), layout) };
    }
}

/// The deleter of both flavours: ends the export on the buffer (which may
/// release the buffer's memory), ordered after the consumer's stream, and
/// retires the block. A second call on the same export does nothing.
///
/// # Safety
///
/// `managed` is null or an export built by [`build`], not freed yet (a
/// second call soon after the first is a no-op, see [`retire`]).
unsafe extern "C" fn delete<M: ManagedStruct>(managed: *mut M) {
    let Some(retiring) = NonNull::new(managed.cast::<u8>()) else {
        return;
    };
    let block = managed.cast::<Block<M>>();
    // SAFETY: `managed` is the first field of a `Block<M>` still allocated
    // (see `build` and `retire`).
    if unsafe { (*block).deleted.swap(true, Ordering::AcqRel) } {
        tracing::error!(
            target: "devmm::dlpack",
            "a DLPack consumer called the deleter of an export twice; the second call does nothing"
        );
        return;
    }
    // SAFETY: `block` is a live block whose `deleted` flag this call set,
    // so its owner is taken exactly once, here.
    let (owner, consumer, held, layout) = unsafe {
        (
            ManuallyDrop::take(&mut (*block).owner),
            ManuallyDrop::take(&mut (*block).consumer),
            ManuallyDrop::take(&mut (*block).held),
            (*block).layout,
        )
    };
    // SAFETY: the block was allocated with `layout` in `build`; only a
    // repeated deleter call reads it (its `deleted` flag) from now on.
    unsafe { retire(retiring, layout) };
    // A deleter called from C must not unwind; a resource whose release
    // panics is logged instead of aborting the consumer's process.
    let released = catch_unwind(AssertUnwindSafe(move || {
        match &consumer {
            Some(consumer) => {
                if !owner.buffer().release_export_after(Some(consumer)) {
                    // Unordered, the release could free memory the consumer
                    // still reads: the buffer is kept for the process's life.
                    std::mem::forget(owner);
                    drop(held);
                    return;
                }
            }
            None => owner.buffer().release_export(),
        }
        drop(owner);
        drop(held);
    }));
    if released.is_err() {
        tracing::error!(target: "devmm::dlpack", "releasing an exported buffer panicked");
    }
}

/// Something an export keeps alive until its deleter runs that the core
/// does not know: a Python object, say, which a Python producer's export
/// holds as the seed's holds its `Tensor`. It is a pointer and the
/// function that releases it; the release runs once, when the deleter
/// runs, on whichever thread runs it (or when the owner is dropped
/// unused).
///
/// ```
/// use std::ffi::c_void;
/// use std::ptr::NonNull;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use devmm::dlpack::{DlpackRequest, ExportOwner};
///
/// static RELEASED: AtomicUsize = AtomicUsize::new(0);
/// unsafe fn release(_: NonNull<c_void>) {
///     RELEASED.fetch_add(1, Ordering::SeqCst);
/// }
/// let t = devmm::empty(&[4], devmm::DType::UINT8, &devmm::EmptyOptions::new())?;
/// let mut export = t.to_dlpack(&DlpackRequest::new())?;
/// // SAFETY: `release` may run on any thread and touches nothing.
/// export.hold(unsafe { ExportOwner::new(NonNull::dangling(), release) });
/// assert_eq!(RELEASED.load(Ordering::SeqCst), 0);
/// drop(export); // the deleter runs, and releases what the export held
/// assert_eq!(RELEASED.load(Ordering::SeqCst), 1);
/// # Ok::<(), devmm::Error>(())
/// ```
pub struct ExportOwner {
    ptr: NonNull<c_void>,
    release: unsafe fn(NonNull<c_void>),
}

// SAFETY: `ExportOwner::new`'s contract: the release may run on any thread.
unsafe impl Send for ExportOwner {}
// SAFETY: shared access reads nothing; only the drop calls the release.
unsafe impl Sync for ExportOwner {}

impl ExportOwner {
    /// An owner released by `release(ptr)`.
    ///
    /// # Safety
    ///
    /// Calling `release(ptr)` once, from any thread, at any time until the
    /// process exits, must be sound.
    pub unsafe fn new(ptr: NonNull<c_void>, release: unsafe fn(NonNull<c_void>)) -> ExportOwner {
        ExportOwner { ptr, release }
    }
}

impl Drop for ExportOwner {
    fn drop(&mut self) {
        // SAFETY: `new`'s contract; an owner is dropped once.
        unsafe { (self.release)(self.ptr) }
    }
}

impl fmt::Debug for ExportOwner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExportOwner")
            .field("ptr", &self.ptr)
            .finish()
    }
}

/// An owned DLPack export: either managed struct, in its one heap block.
///
/// Hand it to a consumer with [`into_raw`](Self::into_raw): the consumer
/// then owns the deleter call. Dropping an export nobody took runs the
/// deleter. Until the deleter runs, the tensor's buffer (and its resource
/// chain) stays alive, even across [`DeviceBuffer::free`](crate::DeviceBuffer::free).
///
/// ```
/// use devmm::dlpack::{DlpackFlavor, DlpackRequest};
/// use devmm::{empty, DType, EmptyOptions};
/// let t = empty(&[2, 3], DType::FLOAT32, &EmptyOptions::new())?;
/// let export = t.to_dlpack(&DlpackRequest::new().max_version(1, 1))?;
/// assert_eq!(export.flavor(), DlpackFlavor::Versioned);
/// assert_eq!(export.version(), Some((1, 1)));
/// assert_eq!(export.shape(), &[2, 3]);
/// assert_eq!(export.strides(), &[3, 1]);
/// assert_eq!(t.buffer().live_exports(), 1);
/// drop(export); // nobody took it: the deleter runs
/// assert_eq!(t.buffer().live_exports(), 0);
/// # Ok::<(), devmm::Error>(())
/// ```
pub struct DlpackExport {
    raw: NonNull<c_void>,
    flavor: DlpackFlavor,
}

// SAFETY: the block owns a `Tensor` (Send + Sync) and plain data; the
// deleter may run on any thread.
unsafe impl Send for DlpackExport {}
// SAFETY: shared access only reads fields that never change after `build`.
unsafe impl Sync for DlpackExport {}

impl DlpackExport {
    /// Which managed struct this is.
    pub fn flavor(&self) -> DlpackFlavor {
        self.flavor
    }

    /// The version stamped in a versioned export; `None` for legacy ones.
    pub fn version(&self) -> Option<(u32, u32)> {
        self.versioned().map(|m| (m.version.major, m.version.minor))
    }

    /// The flags of a versioned export (`DLPACK_FLAG_BITMASK_*`); 0 for legacy ones.
    pub fn flags(&self) -> u64 {
        self.versioned().map_or(0, |m| m.flags)
    }

    /// The `DLTensor` a consumer reads.
    pub fn dl_tensor(&self) -> &DLTensor {
        match self.flavor {
            DlpackFlavor::Versioned => {
                // SAFETY: `raw` points at a live struct of the flavour's
                // type, owned by `self`, for as long as `self` is borrowed.
                let managed = unsafe { self.raw.cast::<DLManagedTensorVersioned>().as_ref() };
                managed.dl_tensor()
            }
            DlpackFlavor::Legacy => {
                // SAFETY: as above.
                let managed = unsafe { self.raw.cast::<DLManagedTensor>().as_ref() };
                managed.dl_tensor()
            }
        }
    }

    /// The exported shape (`dl_tensor().shape`, `ndim` values).
    pub fn shape(&self) -> &[i64] {
        self.dims(self.dl_tensor().shape)
    }

    /// The exported strides in elements (`dl_tensor().strides`, always explicit).
    pub fn strides(&self) -> &[i64] {
        self.dims(self.dl_tensor().strides)
    }

    fn dims(&self, start: *mut i64) -> &[i64] {
        let ndim = usize::try_from(self.dl_tensor().ndim).unwrap_or(0);
        // SAFETY: `build` points shape and strides at `ndim` initialised
        // values inside the block, which lives as long as `self`.
        unsafe { std::slice::from_raw_parts(start, ndim) }
    }

    fn versioned(&self) -> Option<&DLManagedTensorVersioned> {
        // SAFETY: a versioned export's pointer is a live
        // `DLManagedTensorVersioned` owned by `self`.
        (self.flavor == DlpackFlavor::Versioned)
            .then(|| unsafe { self.raw.cast::<DLManagedTensorVersioned>().as_ref() })
    }

    /// Keeps `owner` alive until the export's deleter runs (an owner held
    /// before is released now).
    pub fn hold(&mut self, owner: ExportOwner) {
        let slot = match self.flavor {
            // SAFETY: `raw` is the head of a live block of the flavour's
            // struct (see `build`), owned by `self`.
            DlpackFlavor::Versioned => unsafe {
                &mut (*self.raw.cast::<Block<DLManagedTensorVersioned>>().as_ptr()).held
            },
            // SAFETY: as above.
            DlpackFlavor::Legacy => unsafe {
                &mut (*self.raw.cast::<Block<DLManagedTensor>>().as_ptr()).held
            },
        };
        **slot = Some(owner);
    }

    /// The managed struct's address, still owned by `self`.
    pub fn as_ptr(&self) -> *mut c_void {
        self.raw.as_ptr()
    }

    /// Gives the managed struct to the consumer: a `*mut
    /// DLManagedTensorVersioned` or `*mut DLManagedTensor` by
    /// [`flavor`](Self::flavor). The consumer must call its deleter exactly
    /// once, from any thread.
    pub fn into_raw(self) -> *mut c_void {
        let raw = self.raw.as_ptr();
        std::mem::forget(self);
        raw
    }

    /// Takes back an export given away with [`into_raw`](Self::into_raw)
    /// (a PyCapsule destructor does this for a capsule nobody consumed);
    /// dropping the result runs the deleter. `None` for a null pointer.
    ///
    /// ```
    /// use devmm::dlpack::{DlpackExport, DlpackRequest};
    /// let t = devmm::empty(&[4], devmm::DType::UINT8, &devmm::EmptyOptions::new())?;
    /// let export = t.to_dlpack(&DlpackRequest::new())?;
    /// let flavor = export.flavor();
    /// let raw = export.into_raw();
    /// assert_eq!(t.buffer().live_exports(), 1);
    /// // SAFETY: `raw` came from `into_raw` and nobody deleted it.
    /// drop(unsafe { DlpackExport::from_raw(raw, flavor) });
    /// assert_eq!(t.buffer().live_exports(), 0);
    /// # Ok::<(), devmm::Error>(())
    /// ```
    ///
    /// # Safety
    ///
    /// `raw` is null or came from `into_raw` of an export of `flavor`, and
    /// its deleter has not run and will not run otherwise.
    pub unsafe fn from_raw(raw: *mut c_void, flavor: DlpackFlavor) -> Option<DlpackExport> {
        NonNull::new(raw).map(|raw| DlpackExport { raw, flavor })
    }
}

impl Drop for DlpackExport {
    fn drop(&mut self) {
        let raw = self.raw.as_ptr();
        match self.flavor {
            // SAFETY: `self` owns the live export and is dropped once.
            DlpackFlavor::Versioned => unsafe {
                run_deleter(raw.cast::<DLManagedTensorVersioned>())
            },
            // SAFETY: as above.
            DlpackFlavor::Legacy => unsafe { run_deleter(raw.cast::<DLManagedTensor>()) },
        }
    }
}

impl fmt::Debug for DlpackExport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self.dl_tensor();
        f.debug_struct("DlpackExport")
            .field("flavor", &self.flavor)
            .field("version", &self.version())
            .field("flags", &self.flags())
            .field("data", &t.data)
            .field("device", &t.device)
            .field("dtype", &t.dtype)
            .field("shape", &self.shape())
            .field("strides", &self.strides())
            .finish()
    }
}

impl Tensor {
    /// Exports the tensor as DLPack, zero-copy, as `__dlpack__` does.
    ///
    /// Negotiation: a `max_version` of (1, 0) or newer gets the versioned
    /// struct stamped (1, 1) (or the consumer's older 1.x, see
    /// [`DlpackRequest::stamped_version`]), with `READ_ONLY` set for read-only tensors;
    /// otherwise the legacy struct, which read-only tensors refuse. A
    /// `dl_device` other than the tensor's, `copy = true`, and a freed
    /// buffer are refused with [`Error::Dlpack`]. The stream handoff goes
    /// through the runtime of the buffer's stream: unless the consumer asked
    /// for none (`stream = -1`), its stream waits on the buffer's stream. A
    /// consumer that names no stream (`None`) for memory the host reads
    /// (pinned, managed) gets it after the buffer's stream has finished, as
    /// a host reader such as NumPy needs.
    ///
    /// Zero-size tensors export a null data pointer; strides are always
    /// explicit; `byte_offset` is 0 and `data` is the first element.
    ///
    /// ```
    /// use devmm::dlpack::DlpackRequest;
    /// use devmm::{empty, DType, EmptyOptions, Error};
    /// let t = empty(&[2, 2], DType::FLOAT32, &EmptyOptions::new())?;
    /// let refused = t.to_dlpack(&DlpackRequest::new().copy(true)).unwrap_err();
    /// assert!(matches!(refused, Error::Dlpack { .. }));
    /// assert_eq!(refused.to_string(), "copy=True is not supported; devmm exports are always zero-copy; call Tensor.to(device) for a copy and export that");
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn to_dlpack(&self, request: &DlpackRequest) -> Result<DlpackExport> {
        let flavor = request.negotiate(self)?;
        // One virtual call through the resource, shared by every step below.
        let device = self.device();
        let buffer = self.buffer();
        let producer = buffer.stream();
        // Kept even when it is the producer's own stream, which needs no
        // hand-off (`hand_off` skips it): a `free` on another stream while
        // the export lives must still wait for the consumer's work there.
        let consumer = producer.consumer_for(device, request.stream)?;
        if request.stream.is_none() {
            // A consumer that names no stream for memory the host reads may
            // read it at once (NumPy's `from_dlpack` never names one): the
            // queued work is done first, which also orders the legacy
            // stream `None` stands for on a GPU.
            self.wait_for_host_on(device.ty())?;
        }
        buffer.acquire_export().map_err(|_| freed_refusal(self))?;
        let flags = if self.is_read_only() {
            DLPACK_FLAG_BITMASK_READ_ONLY
        } else {
            0
        };
        let built = match flavor {
            DlpackFlavor::Versioned => {
                build::<DLManagedTensorVersioned>(self, device, flags, consumer.clone()).map(
                    |raw| {
                        let (major, minor) = request.stamped_version();
                        // SAFETY: the block was just built and nobody else sees it yet.
                        unsafe { (*raw.as_ptr()).version = DLPackVersion { major, minor } };
                        raw.cast()
                    },
                )
            }
            DlpackFlavor::Legacy => {
                build::<DLManagedTensor>(self, device, flags, consumer.clone()).map(NonNull::cast)
            }
        };
        let export = match built {
            Ok(raw) => DlpackExport { raw, flavor },
            Err(error) => {
                buffer.release_export();
                return Err(error);
            }
        };
        // On failure the export drops here and its deleter ends the export.
        hand_off(consumer.as_ref(), producer)?;
        Ok(export)
    }
}

/// Orders the consumer's stream after the producer's. Nothing to do when
/// the consumer asked for no synchronization (`None`) or names the
/// producer's own stream, which is ordered after itself already; a
/// producer on another device (pinned memory, which DLPack names device 0
/// whatever GPU's stream orders it) is synchronized instead, as no stream
/// can wait for another device's.
#[inline(always)]
pub(super) fn hand_off(consumer: Option<&Stream>, producer: &Stream) -> Result<()> {
    match consumer {
        Some(consumer) if consumer == producer => Ok(()),
        Some(consumer) if consumer.device() == producer.device() => consumer.wait(producer),
        Some(_) => producer.synchronize(),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::hand_off;
    use crate::device::Device;
    use crate::error::Result;
    use crate::stream::{Stream, StreamOps};

    /// Stream operations that record every wait (and every synchronize,
    /// as a wait of nothing on the stream) instead of doing it.
    #[derive(Debug, Default)]
    struct Waits(Mutex<Vec<(Device, usize, usize)>>);

    impl StreamOps for Waits {
        fn synchronize(&self, device: Device, stream: usize) -> Result<()> {
            self.0.lock().unwrap().push((device, 0, stream));
            Ok(())
        }
        fn wait(&self, device: Device, consumer: usize, producer: usize) -> Result<()> {
            self.0.lock().unwrap().push((device, consumer, producer));
            Ok(())
        }
        fn destroy(&self, _: Device, _: usize) {}
        fn runtime(self: Arc<Self>) -> Result<Arc<dyn crate::StreamRuntime>> {
            Ok(crate::runtime::cpu::shared())
        }
    }

    #[test]
    fn the_consumer_waits_on_the_producer_unless_it_asked_for_nothing_or_is_the_producer() {
        let waits = Arc::new(Waits::default());
        let gpu = Device::cuda(1);
        let producer = Stream::borrowed(gpu, 0x10, waits.clone());
        let consumer = Stream::borrowed(gpu, 0x20, waits.clone());
        hand_off(None, &producer).unwrap();
        hand_off(Some(&producer), &producer).unwrap();
        assert!(waits.0.lock().unwrap().is_empty());
        hand_off(Some(&consumer), &producer).unwrap();
        assert_eq!(*waits.0.lock().unwrap(), [(gpu, 0x20, 0x10)]);
    }

    #[test]
    fn an_extent_beyond_int64_is_refused_and_ends_the_export() {
        use crate::dlpack::DlpackRequest;
        use crate::{DType, DeviceBuffer, Layout, Tensor};
        // A zero extent makes the tensor empty, so any other extent is a
        // valid layout; DLPack's int64 cannot carry this one.
        let huge = 1usize << 63;
        let layout = Layout::new(&[0, huge], &[1, 1], DType::UINT8, 1).unwrap();
        let buffer = Arc::new(DeviceBuffer::on_device(0, Device::CPU).unwrap());
        let t = Tensor::from_buffer(buffer, DType::UINT8, layout, 0).unwrap();
        let err = t
            .to_dlpack(&DlpackRequest::new().max_version(1, 1))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("extent or stride {huge} does not fit DLPack's int64; use a smaller shape")
        );
        assert_eq!(t.buffer().live_exports(), 0);
        let shape = Layout::new(&[0, 3], &[3, 1], DType::UINT8, 1).unwrap();
        let ok = Tensor::from_buffer(Arc::clone(t.buffer()), DType::UINT8, shape, 0).unwrap();
        assert_eq!(
            ok.to_dlpack(&DlpackRequest::new()).unwrap().shape(),
            &[0, 3]
        );
    }

    #[test]
    fn a_producer_on_another_device_is_synchronized() {
        let waits = Arc::new(Waits::default());
        let producer = Stream::borrowed(Device::cuda(0), 0x10, waits.clone());
        let consumer = Stream::borrowed(Device::cuda(1), 0x10, waits.clone());
        hand_off(Some(&consumer), &producer).unwrap();
        assert_eq!(*waits.0.lock().unwrap(), [(Device::cuda(0), 0, 0x10)]);
    }

    /// A block for the quarantine, allocated with `layout`.
    fn block(layout: super::AllocLayout) -> super::Retired {
        // SAFETY: the test layouts are non-zero-sized.
        let raw = unsafe { std::alloc::alloc(layout) };
        super::Retired(std::ptr::NonNull::new(raw).unwrap(), layout)
    }

    #[test]
    fn a_quarantined_block_is_held_for_its_term_then_freed_or_reused_by_its_layout() {
        use super::{AllocLayout, QUARANTINE, Quarantine};
        let (small, large) = (
            AllocLayout::from_size_align(64, 8).unwrap(),
            AllocLayout::from_size_align(96, 8).unwrap(),
        );
        let mut q = Quarantine(Default::default());
        let first = block(small);
        let first_ptr = first.0;
        assert!(q.push(first).is_none());
        for _ in 1..QUARANTINE {
            assert!(q.push(block(small)).is_none());
        }
        // Still within its term: nothing may take the first block.
        assert_eq!(q.reuse(small), None);
        // One block past the term is kept for the next export to take...
        assert!(q.push(block(small)).is_none());
        assert_eq!(
            q.reuse(large),
            None,
            "only a block of the same layout is reused"
        );
        assert_eq!(q.reuse(small), Some(first_ptr));
        // SAFETY: allocated with `small` above, and taken out of the queue.
        unsafe { std::alloc::dealloc(first_ptr.as_ptr(), small) };
        // ...and the oldest goes back to the allocator once two are past it.
        assert!(q.push(block(small)).is_none());
        let freed = q
            .push(block(large))
            .expect("the oldest block, past its term");
        // SAFETY: popped from the queue, allocated with its layout.
        unsafe { std::alloc::dealloc(freed.0.as_ptr(), freed.1) };
        // Dropping the quarantine (its thread ends) frees the rest: miri
        // and valgrind see neither a leak nor a double free.
        drop(q);
    }
}
