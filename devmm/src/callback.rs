//! A resource made of two closures: the escape hatch for allocators devmm
//! does not wrap (and the bridge Python-defined resources go through).

use std::fmt;

use crate::device::Device;
use crate::error::{Error, MisuseKind, Result};
use crate::ptr::DevicePtr;
use crate::resource::{MemoryInfo, MemoryResource};
use crate::stream::Stream;

type AllocateFn = dyn Fn(usize, &Stream) -> Result<DevicePtr> + Send + Sync;
type DeallocateFn = dyn Fn(DevicePtr, usize, &Stream) -> Result<()> + Send + Sync;
type AvailableFn = dyn Fn() -> Result<Option<MemoryInfo>> + Send + Sync;

/// A resource whose `allocate` and `deallocate` are closures.
///
/// The closures own whatever state they capture. `alignment` is the promise
/// callers rely on; an `allocate` closure that breaks it, or returns null
/// for a non-empty request, is reported as [`Error::Misuse`] instead of
/// handing out the pointer.
///
/// ```
/// use devmm::{CallbackMemoryResource, Device, DevicePtr, MemoryResource, Stream};
/// let mr = CallbackMemoryResource::new(
///     Device::CPU,
///     8,
///     |n, _s| Ok(DevicePtr::from_host_ptr(Box::into_raw(vec![0u64; n.div_ceil(8)].into_boxed_slice()) as *mut u64)),
///     |p, n, _s| {
///         // SAFETY: `p` came from the allocate closure with the same `n`.
///         drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p.as_host_ptr::<u64>(), n.div_ceil(8))) });
///         Ok(())
///     },
/// )?;
/// assert!(CallbackMemoryResource::new(Device::CPU, 3, |_, _| Ok(DevicePtr::NULL), |_, _, _| Ok(())).is_err());
/// let s = Stream::cpu();
/// let p = mr.allocate(24, &s)?;
/// unsafe { mr.deallocate(p, 24, &s)? };
/// # Ok::<(), devmm::Error>(())
/// ```
pub struct CallbackMemoryResource {
    name: String,
    device: Device,
    alignment: usize,
    dereferenceable: bool,
    stream_ordered: bool,
    allocate: Box<AllocateFn>,
    deallocate: Box<DeallocateFn>,
    available: Option<Box<AvailableFn>>,
}

impl CallbackMemoryResource {
    /// A resource on `device` promising `alignment`, a power of two (1
    /// promises nothing); anything else is an [`Error::InvalidArgument`].
    pub fn new(
        device: Device,
        alignment: usize,
        allocate: impl Fn(usize, &Stream) -> Result<DevicePtr> + Send + Sync + 'static,
        deallocate: impl Fn(DevicePtr, usize, &Stream) -> Result<()> + Send + Sync + 'static,
    ) -> Result<CallbackMemoryResource> {
        crate::resource::check_alignment("CallbackMemoryResource", alignment)?;
        Ok(CallbackMemoryResource {
            name: "CallbackMemoryResource".into(),
            device,
            alignment,
            dereferenceable: false,
            stream_ordered: false,
            allocate: Box::new(allocate),
            deallocate: Box::new(deallocate),
            available: None,
        })
    }

    /// Declares that the closures allocate and free in the order of the
    /// stream they are given ([`MemoryResource::stream_ordered`]), as a
    /// pool over `cudaMallocAsync` does; undeclared, they are immediate.
    ///
    /// ```
    /// use devmm::{CallbackMemoryResource, Device, DevicePtr, MemoryResource};
    /// let mr = CallbackMemoryResource::new(Device::CPU, 1, |_, _| Ok(DevicePtr::NULL), |_, _, _| Ok(()))?;
    /// assert!(!mr.stream_ordered());
    /// assert!(mr.with_stream_ordered(true).stream_ordered());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn with_stream_ordered(mut self, stream_ordered: bool) -> Self {
        self.stream_ordered = stream_ordered;
        self
    }

    /// Answers [`MemoryResource::available_memory`] with `available`: its
    /// figures, or (for `None`, a resource that cannot tell) its device's
    /// runtime's, as without it.
    ///
    /// ```
    /// use devmm::{CallbackMemoryResource, Device, DevicePtr, MemoryInfo, MemoryResource};
    /// let mr = CallbackMemoryResource::new(Device::CPU, 1, |_, _| Ok(DevicePtr::NULL), |_, _, _| Ok(()))?
    ///     .with_available_memory(|| Ok(Some(MemoryInfo { free: 1, total: 2 })));
    /// assert_eq!(mr.available_memory()?, MemoryInfo { free: 1, total: 2 });
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn with_available_memory(
        mut self,
        available: impl Fn() -> Result<Option<MemoryInfo>> + Send + Sync + 'static,
    ) -> Self {
        self.available = Some(Box::new(available));
        self
    }

    /// Declares that the closures hand out real memory of the device, so
    /// host copies and NumPy may dereference it
    /// ([`MemoryResource::dereferenceable`]); undeclared, they are refused.
    ///
    /// ```
    /// use devmm::{CallbackMemoryResource, Device, DevicePtr, MemoryResource};
    /// let fake = CallbackMemoryResource::new(Device::CPU, 1, |_, _| Ok(DevicePtr::from_addr(64)), |_, _, _| Ok(()))?;
    /// assert!(!fake.dereferenceable());
    /// assert!(fake.with_dereferenceable_memory(true).dereferenceable());
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn with_dereferenceable_memory(mut self, dereferenceable: bool) -> Self {
        self.dereferenceable = dereferenceable;
        self
    }

    /// Names the resource in its `Debug` output, and so in every error and
    /// resource chain, after what defines it (a Python class) rather than
    /// `CallbackMemoryResource`.
    ///
    /// ```
    /// use devmm::{CallbackMemoryResource, Device, DevicePtr};
    /// let mr = CallbackMemoryResource::new(Device::CPU, 8, |_, _| Ok(DevicePtr::NULL), |_, _, _| Ok(()))?
    ///     .named("ArenaResource");
    /// assert_eq!(format!("{mr:?}"), "ArenaResource(device=cpu:0, alignment=8)");
    /// # Ok::<(), devmm::Error>(())
    /// ```
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    fn misuse(&self, kind: MisuseKind, ptr: DevicePtr, nbytes: usize) -> Error {
        Error::Misuse {
            kind,
            ptr,
            nbytes,
            device: self.device,
            resource: format!("{self:?}"),
            test_double: false,
        }
    }
}

impl fmt::Debug for CallbackMemoryResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}(device={}, alignment={})",
            self.name, self.device, self.alignment
        )
    }
}

impl MemoryResource for CallbackMemoryResource {
    fn allocate(&self, nbytes: usize, stream: &Stream) -> Result<DevicePtr> {
        let ptr = (self.allocate)(nbytes, stream)?;
        if ptr.is_null() && nbytes > 0 {
            return Err(self.misuse(MisuseKind::NullAllocation, ptr, nbytes));
        }
        if !ptr.is_aligned(self.alignment) {
            // Give the memory back rather than leak it; the caller never saw it.
            let _ = (self.deallocate)(ptr, nbytes, stream);
            let promised = self.alignment;
            return Err(self.misuse(MisuseKind::Misaligned { promised }, ptr, nbytes));
        }
        Ok(ptr)
    }

    unsafe fn deallocate(&self, ptr: DevicePtr, nbytes: usize, stream: &Stream) -> Result<()> {
        // `deallocate(NULL, 0)` reaches the closure: its allocate may have
        // returned NULL for a zero-byte request.
        crate::ledger::check_null(ptr, nbytes).map_err(|kind| self.misuse(kind, ptr, nbytes))?;
        (self.deallocate)(ptr, nbytes, stream)
    }

    fn device(&self) -> Device {
        self.device
    }

    fn guaranteed_alignment(&self) -> usize {
        self.alignment
    }

    fn stream_ordered(&self) -> bool {
        self.stream_ordered
    }

    fn runs_callbacks(&self) -> bool {
        true
    }

    fn available_memory(&self) -> Result<MemoryInfo> {
        if let Some(info) = self.available.as_ref().map(|f| f()).transpose()?.flatten() {
            return Ok(info);
        }
        crate::runtime::runtime_for(self.device)?.memory_info(self.device)
    }

    fn dereferenceable(&self) -> bool {
        self.dereferenceable
    }
}
